package retention_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/retention"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/test/brokertest"
)

// The rules of queue-admin-api.md §8 for retention, eviction and the
// always-on cleanup, one test each.

// pop pops up to batch messages of queue's Default partition for group,
// under a lease unless autoAck; nil for a 204.
func pop(t *testing.T, b *brokertest.Broker, queue, group string, batch int, autoAck bool) *brokertest.Popped {
	t.Helper()
	return b.Pop(t, fmt.Sprintf("/api/v1/pop/queue/%s/partition/Default?batch=%d&consumerGroup=%s&autoAck=%t",
		queue, batch, group, autoAck))
}

func sweep(t *testing.T, b *brokertest.Broker) retention.Stats {
	t.Helper()
	st, err := sweeper(b, time.Hour).Sweep(t.Context())
	require.NoError(t, err)
	return st
}

func evict(t *testing.T, b *brokertest.Broker) retention.Stats {
	t.Helper()
	st, err := sweeper(b, time.Hour).Evict(t.Context())
	require.NoError(t, err)
	return st
}

// committed is group's committed offset on the queue's one partition.
func committed(t *testing.T, b *brokertest.Broker, queue, group string) int64 {
	t.Helper()
	for _, c := range b.Cursors(t, queue) {
		if c.Group == group {
			return c.Committed
		}
	}
	t.Fatalf("queue %s has no cursor of %s", queue, group)
	return 0
}

func TestRetentionEnabledIsTheMasterSwitch(t *testing.T) {
	b := shared(t)
	q := b.Q("off")
	configure(t, b, q, map[string]any{"retentionSeconds": 60, "completedRetentionSeconds": 60})
	b.PushN(t, q, "", 0, 3)
	pop(t, b, q, "g", 10, true)
	b.Age(t, q, time.Hour)
	st := sweep(t, b)
	require.Zero(t, st.Aged+st.Consumed+st.Segments, "retentionSeconds and completedRetentionSeconds without retentionEnabled")
	require.Equal(t, 1, segments(t, b, q))

	// retentionEnabled alone, with both seconds 0, deletes nothing either.
	configure(t, b, q, map[string]any{"retentionEnabled": true, "retentionSeconds": 0, "completedRetentionSeconds": 0})
	st = sweep(t, b)
	require.Zero(t, st.Aged+st.Consumed+st.Segments)
	require.Equal(t, 1, segments(t, b, q))
}

func TestRetentionSecondsDeletesMessagesConsumedOrNot(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	configure(t, b, q, map[string]any{"retentionEnabled": true, "retentionSeconds": 60})
	b.PushN(t, q, "", 0, 4) // offsets 0-3: g consumes 0 and 1, the rest is pending
	require.Equal(t, []int{0, 1}, pop(t, b, q, "g", 2, true).Ns())
	b.Age(t, q, 2*time.Minute)
	b.PushN(t, q, "", 4, 2) // offsets 4-5, young

	st := sweep(t, b)
	require.EqualValues(t, 4, st.Aged, "pending messages 2 and 3 go too")
	require.EqualValues(t, 1, st.Segments)
	require.EqualValues(t, 4, committed(t, b, q, "g"), "the cursor moves past what is gone")
	require.Equal(t, []int{4, 5}, pop(t, b, q, "g", 10, true).Ns(), "only the young segment is left")
	require.Equal(t, []int{4, 5}, pop(t, b, q, "new", 10, true).Ns(), "a new group starts at the floor")
}

func TestCompletedRetentionSecondsDeletesOnlyBelowTheLowestCommitted(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	configure(t, b, q, map[string]any{"retentionEnabled": true, "completedRetentionSeconds": 60})
	b.PushN(t, q, "", 0, 4) // one segment, offsets 0-3
	b.PushN(t, q, "", 4, 2) // offsets 4-5
	pop(t, b, q, "fast", 10, true)
	require.Equal(t, []int{0, 1}, pop(t, b, q, "slow", 2, true).Ns())
	b.Age(t, q, time.Hour)

	st := sweep(t, b)
	require.EqualValues(t, 2, st.Consumed, "offsets 0 and 1, below slow's cursor")
	require.Zero(t, st.Segments, "the first segment still holds 2 and 3, which slow has not consumed")
	require.EqualValues(t, 2, b.Stored(t, q).Floor)
	require.Equal(t, []int{2, 3, 4, 5}, pop(t, b, q, "slow", 10, true).Ns(), "nothing is lost for the slowest group")
	require.Equal(t, []int{2, 3, 4, 5}, pop(t, b, q, "late", 10, true).Ns(),
		"a group that comes later starts at the floor, inside the segment")

	// Now every cursor is at the end: everything old goes, and a group that
	// comes later finds nothing below the floor.
	st = sweep(t, b)
	require.EqualValues(t, 4, st.Consumed)
	require.EqualValues(t, 2, st.Segments)
	require.Nil(t, pop(t, b, q, "later", 10, true))
}

func TestCompletedRetentionSkipsPartitionsWithNoCursorOrAnUnmovedOne(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	configure(t, b, q, map[string]any{"retentionEnabled": true, "completedRetentionSeconds": 60})
	b.PushN(t, q, "", 0, 3)
	b.Age(t, q, time.Hour)
	require.Zero(t, sweep(t, b).Consumed, "no cursor")

	// A group that popped and never acked has a cursor that never moved.
	require.NotNil(t, pop(t, b, q, "g", 10, false))
	require.Zero(t, sweep(t, b).Consumed, "an unmoved cursor counts as position 0")
	require.Equal(t, 1, segments(t, b, q))
}

func TestRetentionDeletesInChunksUntilDone(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	configure(t, b, q, map[string]any{"retentionEnabled": true, "retentionSeconds": 60})
	for i := range 7 {
		b.PushN(t, q, "", i, 1)
	}
	b.Age(t, q, time.Hour)
	sw := sweeperWith(b, retention.Settings{DedupWindow: time.Hour, RetentionChunk: 2, EvictionChunk: 2, CleanupAfter: time.Hour})
	st, err := sw.Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 7, st.Segments, "four statements of at most 2 rows")
	require.Zero(t, segments(t, b, q))
}

func TestEvictionDeletesMessagesOlderThanMaxWaitTimeSecondsForEveryGroup(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	configure(t, b, q, map[string]any{"maxWaitTimeSeconds": 60})
	b.PushN(t, q, "", 0, 3) // offsets 0-2, old
	require.Equal(t, []int{0}, pop(t, b, q, "a", 1, true).Ns())
	b.Age(t, q, 2*time.Minute)
	b.PushN(t, q, "", 3, 2) // offsets 3-4, young
	require.Zero(t, sweep(t, b).Segments, "retention does not evict")

	st := evict(t, b)
	require.EqualValues(t, 3, st.Evicted, "offsets 0-2, whether a group consumed them or not")
	require.EqualValues(t, 1, st.Segments)
	for _, g := range []string{"a", "b"} {
		require.Equal(t, []int{3, 4}, pop(t, b, q, g, 10, true).Ns(), "group %s gets only the young segment", g)
	}
	require.Zero(t, b.Stored(t, q).DeadLetters, "an evicted message is no dead letter")
}

func TestEvictionDoesNotDependOnRetentionEnabled(t *testing.T) {
	b := shared(t)
	off, on, none := b.Q("off"), b.Q("on"), b.Q("none")
	configure(t, b, off, map[string]any{"maxWaitTimeSeconds": 60, "retentionEnabled": false})
	configure(t, b, on, map[string]any{"maxWaitTimeSeconds": 60, "retentionEnabled": true})
	for _, q := range []string{off, on, none} {
		b.PushN(t, q, "", 0, 2)
		b.Age(t, q, time.Hour)
	}
	require.EqualValues(t, 4, evict(t, b).Evicted)
	require.Equal(t, []int{0, 0, 1}, []int{segments(t, b, off), segments(t, b, on), segments(t, b, none)},
		"only the queue without maxWaitTimeSeconds keeps its messages")
}

func TestEvictedLeasedMessagesAnswerMessageNotFoundWhenAcked(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	configure(t, b, q, map[string]any{"maxWaitTimeSeconds": 60, "leaseTime": 300})
	b.PushN(t, q, "", 0, 2)
	p := pop(t, b, q, "g", 10, false)
	b.Age(t, q, 2*time.Minute) // the lease has 3 minutes left
	require.EqualValues(t, 2, evict(t, b).Evicted)

	first := p.Messages[0]
	resp := b.Do(t, "POST", "/api/v1/ack", "", map[string]any{"transactionId": first.TransactionID,
		"partitionId": first.PartitionID, "leaseId": p.LeaseID, "consumerGroup": "g"})
	require.Contains(t, string(resp.Body), "Message not found", "%d %s", resp.Status, resp.Body)
	c := b.Cursor(t, q)
	require.EqualValues(t, 2, c.Committed, "the cursor jumped to the end of the evicted range")
	require.Nil(t, c.LeaseID, "the lease of a batch wholly evicted ends")

	// A push after the eviction is delivered at once, not after the lease.
	b.PushN(t, q, "", 7, 1)
	require.Equal(t, []int{7}, pop(t, b, q, "g", 10, true).Ns())
}

func TestEvictionRunsEveryEvictionInterval(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	configure(t, b, q, map[string]any{"maxWaitTimeSeconds": 1})
	b.PushN(t, q, "", 0, 1)
	b.Age(t, q, time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweeper(b, time.Hour).Run(ctx, time.Hour, 20*time.Millisecond)
	}()
	defer func() {
		cancel()
		<-done
		// A sweep that the cancel cut short leaves the sweeps' lock to its
		// session until PostgreSQL has ended it: the next test's sweep
		// would find it taken and skip its turn.
		brokertest.Eventually(t, 10*time.Second, func() error {
			ran, err := db.New(b.Pool).Sweep(t.Context(), func(*db.Sweeping) error { return nil })
			if err == nil && !ran {
				err = errors.New("the sweeps' lock is still held")
			}
			return err
		})
	}()
	brokertest.Eventually(t, 10*time.Second, func() error {
		if n := segments(t, b, q); n > 0 {
			return fmt.Errorf("%d segments left", n)
		}
		return nil
	})
}

func TestIdleEmptyPartitionsAreDeletedWithTheirCursors(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	for _, p := range []string{"idle", "consumed-lately", "holds-messages", "pushed-lately"} {
		b.PushN(t, q, p, 0, 1)
		b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/"+p+"?consumerGroup=g&autoAck=true")
	}
	b.Age(t, q, 40*24*time.Hour)
	// consumed-lately: pushed to long ago, consumed now.
	b.PushN(t, q, "consumed-lately", 1, 1)
	b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/consumed-lately?consumerGroup=g&autoAck=true")
	b.Quiet(t, q, "consumed-lately", 40*24*time.Hour)
	b.Quiet(t, q, "pushed-lately", 0)
	for _, p := range []string{"idle", "consumed-lately", "pushed-lately"} {
		require.NoError(t, b.DB.EmptyPartition(t.Context(), b.Tenant, q, p))
	}

	st := sweep(t, b)
	require.False(t, st.Skipped, "no other sweep holds the lock")
	require.EqualValues(t, 1, st.Partitions)
	require.NotContains(t, b.Stored(t, q).Partitions, "idle")
	require.Len(t, b.Cursors(t, q), 3, "the idle partition's cursor went with it")
}

func TestIdlePartitionCleanupDeletesAtMostAThousandPerSweep(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	configure(t, b, q, nil)
	b.AddPartitions(t, q, 1005)
	b.Age(t, q, 40*24*time.Hour)
	idle := len(b.Stored(t, q).Partitions)
	require.EqualValues(t, 1000, sweep(t, b).Partitions)
	require.EqualValues(t, idle-1000, sweep(t, b).Partitions)
	require.Empty(t, b.Stored(t, q).Partitions)
}

func TestEvictingALeasedBatchLetsItsGroupReadWhatFollowsAtOnce(t *testing.T) {
	b := shared(t)
	q := b.Q("q")
	configure(t, b, q, map[string]any{"maxWaitTimeSeconds": 60, "leaseTime": 300})
	b.PushN(t, q, "", 0, 2) // offsets 0-1, to be evicted under a lease
	require.Len(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2&consumerGroup=g").Messages, 2)
	b.Age(t, q, 2*time.Minute) // the lease has 3 minutes left
	b.PushN(t, q, "", 2, 1)    // offset 2, young
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?consumerGroup=g"), "leased for 300 s")

	parked, failed := make(chan brokertest.Response, 1), make(chan error, 1)
	go func() {
		r, err := b.Send("GET", "/api/v1/pop/queue/"+q+"?batch=10&consumerGroup=g&wait=true&timeout=8000", "", nil)
		parked <- r
		failed <- err
	}()
	b.WaitParked(t, 1)
	require.EqualValues(t, 2, evict(t, b).Evicted)
	r := <-parked
	require.NoError(t, <-failed)
	require.Equal(t, http.StatusOK, r.Status, "the parked pop is woken by the eviction, not the lease's end")
	require.Len(t, r.Map(t)["messages"], 1)
}
