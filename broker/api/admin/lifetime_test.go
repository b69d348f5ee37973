package admin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestLifetimeCountersSumEveryMinuteKeptOnceAndSettledMinutesAreRescannedHourly(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	st, arrange := db.New(pool), dbtest.New(pool)
	now := time.Now().Truncate(time.Minute).Add(30 * time.Second)
	pushed := func(tenant string, ago time.Duration, n int64) {
		t.Helper()
		require.NoError(t, arrange.PutQueueMinutes(t.Context(), dbtest.QueueMinute{Tenant: tenant, Queue: "q", Replica: "r1",
			Minute: now.Add(-ago), PushMessages: n, LagMaxMs: n}))
	}
	var l lifetimes
	total := func(at time.Time) int64 {
		t.Helper()
		m, err := l.get(t.Context(), st, "acme", at)
		require.NoError(t, err)
		return m.N[counters.PushMessages]
	}
	pushed("acme", 80*24*time.Hour, 1)
	pushed("acme", 30*time.Minute, 10)
	pushed("acme", 10*time.Minute, 100)
	pushed("acme", 0, 1000)
	pushed("other", 0, 50000)
	require.EqualValues(t, 1111, total(now), "every minute kept, settled or recent, of this tenant only")
	m, err := l.get(t.Context(), st, "acme", now)
	require.NoError(t, err)
	require.EqualValues(t, 1000, m.LagMax, "the largest over the minutes")

	// A flush later than settleAfter is not seen until the hourly rescan...
	pushed("acme", 40*time.Minute, 10000)
	require.EqualValues(t, 1111, total(now))
	// ...while a minute that settles meanwhile moves from the recent sum to
	// the kept one, counted once.
	require.EqualValues(t, 1111, total(now.Add(10*time.Minute)))
	require.EqualValues(t, 11111, total(now.Add(rescanEvery)), "the rescan")
	// The rescan also drops what the retention sweep deleted.
	require.NoError(t, arrange.ForgetQueueMinute(t.Context(), "acme", "q", now.Add(-80*24*time.Hour)))
	require.EqualValues(t, 11111, total(now.Add(rescanEvery+time.Minute)))
	require.EqualValues(t, 11110, total(now.Add(2*rescanEvery)))
}
