package dbtest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestQueueReadsTheFloorAndTheStoredBytes(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "Default", 0, 3)
	b.RaiseFloor(t, q, 2)
	stored := b.Stored(t, q)
	require.EqualValues(t, 2, stored.Floor)
	require.Equal(t, b.SegmentSizes(t, q), []int64{stored.StoredBytes})
}

func TestRetentionEventsListOnlyTheQueueNamed(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "p", 0, 1)
	events, err := b.DB.RetentionEvents(t.Context(), b.Tenant, q)
	require.NoError(t, err)
	require.Empty(t, events, "no sweep took anything")
}

// Not parallel: no other test pushes between the two summaries.
func TestAddOrphanDedupLeavesRangesUnsummarizedUntilSummarized(t *testing.T) {
	b := brokertest.Shared(t)
	require.NoError(t, b.DB.AddOrphanDedup(t.Context(), 30000))
	n, err := b.DB.UnsummarizedDedup(t.Context())
	require.NoError(t, err)
	require.Positive(t, n)
	n, err = b.DB.UnsummarizedDedup(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestPutMinutesWritesOneRowPerTableForTheTenantNamed(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	tenant := b.Q("t")
	require.NoError(t, b.DB.PutMinutes(t.Context(), tenant, time.Now().Add(-time.Hour)))
	require.NoError(t, b.DB.PutMinutes(t.Context(), tenant, time.Now()))
	got, err := b.DB.Minutes(t.Context(), tenant)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"queen.queue_minutes": 2, "queen_streams.query_minutes": 2, "queen.group_minutes": 2,
		"queen.replica_samples": 2, "queen.retention_events": 2}, got)
	got, err = b.DB.Minutes(t.Context(), b.Q("other"))
	require.NoError(t, err)
	require.Equal(t, 0, got["queen.queue_minutes"]+got["queen.replica_samples"])
}

func TestAtRestFillsEveryEmptyPartitionWithOneConsumedMessage(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q})
	b.AddPartitions(t, q, 3)
	require.NoError(t, b.DB.AtRest(t.Context(), b.Tenant, q, "g"))
	stored := b.Stored(t, q)
	require.Equal(t, len(stored.Partitions), stored.Segments)
	require.EqualValues(t, len(stored.Partitions), stored.Committed)
	for _, c := range b.Cursors(t, q) {
		require.Equal(t, dbtest.Cursor{Partition: c.Partition, Group: "g", Committed: 1}, c)
	}
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?consumerGroup=g"), "every message is consumed")
}

func TestSetFlagQuietlyWritesTheFlagBothWays(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	name := b.Q("flag") // a flag no broker reads
	d := db.New(b.Pool)
	for _, on := range []bool{true, false} {
		require.NoError(t, b.DB.SetFlagQuietly(t.Context(), name, on))
		got, err := d.SystemFlags(t.Context(), name)
		require.NoError(t, err)
		require.Equal(t, []bool{on}, got)
	}
}

func TestRunningCountsTheOtherBackendsRunningAStatementOfTheWords(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	word := b.Q("word")
	n, err := b.DB.Running(t.Context(), word)
	require.NoError(t, err)
	require.Zero(t, n)
	slept := make(chan error, 1)
	go func() {
		_, err := b.Pool.Exec(context.Background(), "SELECT pg_sleep(1) /* "+word+" */")
		slept <- err
	}()
	brokertest.Eventually(t, 10*time.Second, func() error {
		n, err := b.DB.Running(t.Context(), "nothing-runs-this", word)
		if err != nil || n != 1 {
			return fmt.Errorf("%d running (%v), want 1", n, err)
		}
		return nil
	})
	require.NoError(t, <-slept)
}

// Not parallel: it counts every LISTEN of the cluster.
func TestListenersCountsTheConnectionsListeningOnTheChannel(t *testing.T) {
	b := brokertest.Shared(t)
	channel := b.Q("channel")
	n, err := b.DB.Listeners(t.Context(), channel)
	require.NoError(t, err)
	require.Zero(t, n)
	conn, err := b.Pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(t.Context(), "LISTEN "+`"`+channel+`"`)
	require.NoError(t, err)
	n, err = b.DB.Listeners(t.Context(), channel)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = conn.Exec(t.Context(), "UNLISTEN *")
	require.NoError(t, err)
}
