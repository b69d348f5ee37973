package counters_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestFlushAddsEachMinutesCountsToTheReplicasRowsAndASecondFlushAddsUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	store := db.New(pool)
	c := counters.New()
	m := time.Date(2026, 5, 6, 12, 0, 30, 0, time.UTC)
	counters.At(c, m)
	c.Add("acme", "orders", counters.PushRequests, 1)
	c.Add("acme", "orders", counters.PushMessages, 10)
	c.Popped("acme", "orders", 4, 100, 40)
	c.Add("other", "orders", counters.PushMessages, 7)
	counters.At(c, m.Add(time.Minute))
	c.Popped("acme", "orders", 1, 5, 5)
	require.NoError(t, c.Flush(ctx, store, "r1"))

	counters.At(c, m)
	c.Add("acme", "orders", counters.PushMessages, 5)
	c.Popped("acme", "orders", 2, 200, 150)
	require.NoError(t, c.Flush(ctx, store, "r1"))
	require.NoError(t, c.Flush(ctx, store, "r1"), "nothing new: nothing written")

	rows := queueMinutes(t, dbtest.New(pool))
	require.Len(t, rows, 3, "acme's two minutes and other's one")
	first := rows[0]
	require.Equal(t, []any{"acme", "orders", "r1", m.Truncate(time.Minute)}, []any{first.Tenant, first.Queue, first.Replica, first.Minute.UTC()})
	require.Equal(t, []int64{1, 15, 2, 6, 300, 6, 150}, []int64{first.PushRequests, first.PushMessages, first.PopRequests, first.PopMessages,
		first.LagSumMs, first.LagCount, first.LagMaxMs})
}

func TestAFailedFlushKeepsItsCountsForTheNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	store := db.New(pool)
	c := counters.New()
	c.Add("default", "q", counters.PushMessages, 3)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, c.Flush(cancelled, store, "r1"))
	c.Add("default", "q", counters.PushMessages, 2)
	require.NoError(t, c.Flush(ctx, store, "r1"))
	require.EqualValues(t, 5, pushed(t, dbtest.New(pool)))
}

func TestCyclesAreCountedPerQueryAndMinuteAndAFailedFlushKeepsThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	store := db.New(pool)
	c := counters.New()
	q, other := uuid.New(), uuid.New()
	counters.At(c, time.Date(2026, 5, 6, 12, 0, 30, 0, time.UTC))
	c.Cycle("acme", q, false)
	c.Cycle("acme", q, true)
	c.Cycle("acme", other, false)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, c.Flush(cancelled, store, "r1"))
	c.Cycle("acme", q, false)
	require.NoError(t, c.Flush(ctx, store, "r1"))
	require.NoError(t, c.Flush(ctx, store, "r2"), "nothing new: nothing written")
	rows, err := dbtest.New(pool).QueryMinutes(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 2, "one row per query and minute")
	i := slices.IndexFunc(rows, func(m dbtest.QueryMinute) bool { return m.QueryID == q.String() })
	require.GreaterOrEqual(t, i, 0)
	got := rows[i]
	require.Equal(t, []any{"acme", "r1", time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)}, []any{got.Tenant, got.Replica, got.Minute.UTC()})
	require.Equal(t, [2]int64{2, 1}, [2]int64{got.Cycles, got.Refused})
}

func TestTheSampleRecordsTheProcessAndThePool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	store := db.New(pool)
	require.NoError(t, pool.Ping(ctx))
	require.NoError(t, counters.SampleNow(ctx, store, "r1", time.Now()))
	samples, err := dbtest.New(pool).Samples(ctx, "r1")
	require.NoError(t, err)
	require.Len(t, samples, 1)
	s := samples[0]
	require.Greater(t, s.RSSBytes, int64(1<<20))
	require.GreaterOrEqual(t, s.Virtual, s.RSSBytes)
	require.GreaterOrEqual(t, s.PoolSize, 1)
}

func TestRunFlushesWhatIsLeftWhenItStops(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	store := db.New(pool)
	c := counters.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, store, counters.Settings{Replica: "r1", FlushEvery: time.Hour}, slog.New(slog.DiscardHandler))
	}()
	c.Add("default", "q", counters.PushMessages, 4)
	cancel()
	<-done
	require.EqualValues(t, 4, pushed(t, dbtest.New(pool)))
}

func TestRunSamplesWritesASampleAtOnceAndStopsWithItsContext(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		counters.RunSamples(ctx, db.New(pool), "r1", slog.New(slog.DiscardHandler))
	}()
	var samples []dbtest.Sample
	brokertest.Eventually(t, 5*time.Second, func() error {
		var err error
		if samples, err = dbtest.New(pool).Samples(t.Context(), "r1"); err != nil || len(samples) == 0 {
			return fmt.Errorf("no sample yet (%v)", err)
		}
		return nil
	})
	cancel()
	<-done
	require.Len(t, samples, 1, "one sample, taken at once")
}

// queueMinutes lists the minutes of counters flushed to d.
func queueMinutes(t *testing.T, d *dbtest.DB) []dbtest.QueueMinute {
	t.Helper()
	rows, err := d.QueueMinutes(t.Context())
	require.NoError(t, err)
	return rows
}

// pushed sums the messages pushed over the minutes flushed to d.
func pushed(t *testing.T, d *dbtest.DB) int64 {
	t.Helper()
	var n int64
	for _, m := range queueMinutes(t, d) {
		n += m.PushMessages
	}
	return n
}
