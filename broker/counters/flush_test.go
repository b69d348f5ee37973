package counters_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/counters"
	"github.com/regent-mq/regent/broker/db"
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

	var pushReq, pushMsgs, popReq, popMsgs, lagSum, lagCount, lagMax int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT push_requests, push_messages, pop_requests, pop_messages, lag_sum_ms, lag_count, lag_max_ms
		FROM queen.queue_minutes WHERE tenant = 'acme' AND queue = 'orders' AND replica = 'r1' AND minute = '2026-05-06T12:00:00Z'`).
		Scan(&pushReq, &pushMsgs, &popReq, &popMsgs, &lagSum, &lagCount, &lagMax))
	require.Equal(t, []int64{1, 15, 2, 6, 300, 6, 150}, []int64{pushReq, pushMsgs, popReq, popMsgs, lagSum, lagCount, lagMax})
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM queen.queue_minutes`).Scan(&rows))
	require.Equal(t, 3, rows, "acme's two minutes and other's one")
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
	var n int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(push_messages) FROM queen.queue_minutes`).Scan(&n))
	require.EqualValues(t, 5, n)
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
	var cycles, refused int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT cycles, refused FROM queen_streams.query_minutes
		WHERE tenant = 'acme' AND query_id = $1 AND replica = 'r1' AND minute = '2026-05-06T12:00:00Z'`, q).Scan(&cycles, &refused))
	require.Equal(t, [2]int64{2, 1}, [2]int64{cycles, refused})
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM queen_streams.query_minutes`).Scan(&rows))
	require.Equal(t, 2, rows, "one row per query and minute")
}

func TestTheSampleRecordsTheProcessAndThePool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	store := db.New(pool)
	require.NoError(t, pool.Ping(ctx))
	require.NoError(t, counters.SampleNow(ctx, store, "r1", time.Now()))
	var rss, virtual int64
	var size int
	require.NoError(t, pool.QueryRow(ctx, `SELECT rss_bytes, virtual_bytes, pool_size FROM queen.replica_samples WHERE replica = 'r1'`).
		Scan(&rss, &virtual, &size))
	require.Greater(t, rss, int64(1<<20))
	require.GreaterOrEqual(t, virtual, rss)
	require.GreaterOrEqual(t, size, 1)
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
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT coalesce(sum(push_messages), 0) FROM queen.queue_minutes`).Scan(&n))
	require.EqualValues(t, 4, n)
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
	var n int
	for range 500 {
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM queen.replica_samples WHERE replica = 'r1'`).Scan(&n))
		if n > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	require.Equal(t, 1, n, "one sample, taken at once")
}
