package retention_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/retention"
	"github.com/regent-mq/regent/test/brokertest"
)

// The rules of queue-admin-api.md §8 for retention, eviction and the
// always-on cleanup, one test each.

func configure(t *testing.T, b *brokertest.Broker, queue string, options map[string]any) {
	t.Helper()
	do(t, b, "POST", "/api/v1/configure", map[string]any{"queue": queue, "options": options})
}

// age makes the segments of queue whose first offset is below before look
// as if pushed ago.
func age(t *testing.T, b *brokertest.Broker, queue string, before int64, ago time.Duration) {
	t.Helper()
	_, err := b.Pool.Exec(t.Context(), `UPDATE queen.log_segments s SET min_created_at = now() - $3::interval,
			max_created_at = now() - $3::interval
		  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE s.partition_id = p.id AND q.name = $1 AND s.base_offset < $2`, queue, before, ago)
	require.NoError(t, err)
}

// pop pops up to batch messages of queue's Default partition for group
// (under a lease unless autoAck) and returns their payloads and the answer.
func pop(t *testing.T, b *brokertest.Broker, queue, group string, batch int, autoAck bool) ([]float64, map[string]any) {
	t.Helper()
	resp := b.Do(t, "GET", fmt.Sprintf("/api/v1/pop/queue/%s/partition/Default?batch=%d&consumerGroup=%s&autoAck=%t",
		queue, batch, group, autoAck), "", nil)
	if resp.Status == http.StatusNoContent {
		return nil, nil
	}
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	m := resp.Map(t)
	var out []float64
	for _, x := range m["messages"].([]any) {
		out = append(out, x.(map[string]any)["data"].(float64))
	}
	return out, m
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

func TestRetentionEnabledIsTheMasterSwitch(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	configure(t, b, "off", map[string]any{"retentionSeconds": 60, "completedRetentionSeconds": 60})
	pushN(t, b, "off", 3)
	pop(t, b, "off", "g", 10, true)
	age(t, b, "off", 100, time.Hour)
	st := sweep(t, b)
	require.Zero(t, st.Aged+st.Consumed+st.Segments, "retentionSeconds and completedRetentionSeconds without retentionEnabled")
	require.Equal(t, 1, segments(t, b))

	// retentionEnabled alone, with both seconds 0, deletes nothing either.
	configure(t, b, "off", map[string]any{"retentionEnabled": true, "retentionSeconds": 0, "completedRetentionSeconds": 0})
	st = sweep(t, b)
	require.Zero(t, st.Aged+st.Consumed+st.Segments)
	require.Equal(t, 1, segments(t, b))
}

func TestRetentionSecondsDeletesMessagesConsumedOrNot(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	configure(t, b, "q", map[string]any{"retentionEnabled": true, "retentionSeconds": 60})
	pushN(t, b, "q", 4) // offsets 0-3: g consumes 0 and 1, the rest is pending
	pushN(t, b, "q", 2) // offsets 4-5, young
	got, _ := pop(t, b, "q", "g", 2, true)
	require.Equal(t, []float64{0, 1}, got)
	age(t, b, "q", 4, 2*time.Minute)

	st := sweep(t, b)
	require.EqualValues(t, 4, st.Aged, "pending messages 2 and 3 go too")
	require.EqualValues(t, 1, st.Segments)
	require.Equal(t, 4, b.Count(t, `SELECT committed FROM queen.cursors WHERE consumer_group = 'g'`),
		"the cursor moves past what is gone")
	got, _ = pop(t, b, "q", "g", 10, true)
	require.Equal(t, []float64{0, 1}, got, "only the young segment is left: its payloads are 0 and 1")
	got, _ = pop(t, b, "q", "new", 10, true)
	require.Len(t, got, 2, "a new group starts at the floor")
}

func TestCompletedRetentionSecondsDeletesOnlyBelowTheLowestCommitted(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	configure(t, b, "q", map[string]any{"retentionEnabled": true, "completedRetentionSeconds": 60})
	pushN(t, b, "q", 4) // one segment, offsets 0-3
	pushN(t, b, "q", 2) // offsets 4-5
	pop(t, b, "q", "fast", 10, true)
	got, _ := pop(t, b, "q", "slow", 2, true)
	require.Equal(t, []float64{0, 1}, got)
	age(t, b, "q", 100, time.Hour)

	st := sweep(t, b)
	require.EqualValues(t, 2, st.Consumed, "offsets 0 and 1, below slow's cursor")
	require.Zero(t, st.Segments, "the first segment still holds 2 and 3, which slow has not consumed")
	require.Equal(t, 2, b.Count(t, `SELECT floor_offset FROM queen.partitions`))
	got, _ = pop(t, b, "q", "slow", 10, true)
	require.Equal(t, []float64{2, 3, 0, 1}, got, "nothing is lost for the slowest group")
	got, _ = pop(t, b, "q", "late", 10, true)
	require.Equal(t, []float64{2, 3, 0, 1}, got, "a group that comes later starts at the floor, inside the segment")

	// Now every cursor is at the end: everything old goes, and a group that
	// comes later finds nothing below the floor.
	st = sweep(t, b)
	require.EqualValues(t, 4, st.Consumed)
	require.EqualValues(t, 2, st.Segments)
	got, _ = pop(t, b, "q", "later", 10, true)
	require.Empty(t, got)
}

func TestCompletedRetentionSkipsPartitionsWithNoCursorOrAnUnmovedOne(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	configure(t, b, "q", map[string]any{"retentionEnabled": true, "completedRetentionSeconds": 60})
	pushN(t, b, "q", 3)
	age(t, b, "q", 100, time.Hour)
	require.Zero(t, sweep(t, b).Consumed, "no cursor")

	// A group that popped and never acked has a cursor that never moved.
	_, m := pop(t, b, "q", "g", 10, false)
	require.NotNil(t, m)
	require.Zero(t, sweep(t, b).Consumed, "an unmoved cursor counts as position 0")
	require.Equal(t, 1, segments(t, b))
}

func TestRetentionDeletesInChunksUntilDone(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	configure(t, b, "q", map[string]any{"retentionEnabled": true, "retentionSeconds": 60})
	for range 7 {
		pushN(t, b, "q", 1)
	}
	age(t, b, "q", 100, time.Hour)
	sw := sweeperWith(b, retention.Settings{DedupWindow: time.Hour, RetentionChunk: 2, EvictionChunk: 2, CleanupAfter: time.Hour})
	st, err := sw.Sweep(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 7, st.Segments, "four statements of at most 2 rows")
	require.Zero(t, segments(t, b))
}

func TestEvictionDeletesMessagesOlderThanMaxWaitTimeSecondsForEveryGroup(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	configure(t, b, "q", map[string]any{"maxWaitTimeSeconds": 60})
	pushN(t, b, "q", 3) // offsets 0-2, old
	pushN(t, b, "q", 2) // offsets 3-4, young
	got, _ := pop(t, b, "q", "a", 1, true)
	require.Equal(t, []float64{0}, got)
	age(t, b, "q", 3, 2*time.Minute)
	require.Zero(t, sweep(t, b).Segments, "retention does not evict")

	st := evict(t, b)
	require.EqualValues(t, 3, st.Evicted, "offsets 0-2, whether a group consumed them or not")
	require.EqualValues(t, 1, st.Segments)
	for _, g := range []string{"a", "b"} {
		got, _ = pop(t, b, "q", g, 10, true)
		require.Equal(t, []float64{0, 1}, got, "group %s gets only the young segment", g)
	}
	require.Zero(t, b.Count(t, `SELECT count(*) FROM queen.dead_letters`), "an evicted message is no dead letter")
}

func TestEvictionDoesNotDependOnRetentionEnabled(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	configure(t, b, "off", map[string]any{"maxWaitTimeSeconds": 60, "retentionEnabled": false})
	configure(t, b, "on", map[string]any{"maxWaitTimeSeconds": 60, "retentionEnabled": true})
	pushN(t, b, "off", 2)
	pushN(t, b, "on", 2)
	pushN(t, b, "none", 2)
	age(t, b, "off", 100, time.Hour)
	age(t, b, "on", 100, time.Hour)
	age(t, b, "none", 100, time.Hour)
	require.EqualValues(t, 4, evict(t, b).Evicted)
	require.Equal(t, 1, segments(t, b), "only the queue without maxWaitTimeSeconds keeps its messages")
}

func TestEvictedLeasedMessagesAnswerMessageNotFoundWhenAcked(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	configure(t, b, "q", map[string]any{"maxWaitTimeSeconds": 60, "leaseTime": 300})
	pushN(t, b, "q", 2)
	_, m := pop(t, b, "q", "g", 10, false)
	msgs := m["messages"].([]any)
	age(t, b, "q", 100, time.Hour)
	require.EqualValues(t, 2, evict(t, b).Evicted)

	first := msgs[0].(map[string]any)
	resp := b.Do(t, "POST", "/api/v1/ack", "", map[string]any{"transactionId": first["transactionId"],
		"partitionId": first["partitionId"], "leaseId": m["leaseId"], "consumerGroup": "g"})
	require.Contains(t, string(resp.Body), "Message not found", "%d %s", resp.Status, resp.Body)
	require.Equal(t, 2, b.Count(t, `SELECT committed FROM queen.cursors WHERE consumer_group = 'g'`),
		"the cursor jumped to the end of the evicted range")
	require.Zero(t, b.Count(t, `SELECT count(*) FROM queen.cursors WHERE lease_id IS NOT NULL`),
		"the lease of a batch wholly evicted ends")

	// A push after the eviction is delivered at once, not after the lease.
	pushN(t, b, "q", 1)
	got, _ := pop(t, b, "q", "g", 10, true)
	require.Equal(t, []float64{0}, got)
}

func TestEvictionRunsEveryEvictionInterval(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	configure(t, b, "q", map[string]any{"maxWaitTimeSeconds": 1})
	pushN(t, b, "q", 1)
	age(t, b, "q", 100, time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweeper(b, time.Hour).Run(ctx, time.Hour, 20*time.Millisecond)
	}()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return segments(t, b) == 0 }, 10*time.Second, 20*time.Millisecond)
}

func TestIdleEmptyPartitionsAreDeletedWithTheirCursors(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	for _, p := range []string{"idle", "consumed-lately", "holds-messages", "pushed-lately"} {
		do(t, b, "POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "partition": p}}})
		b.Do(t, "GET", "/api/v1/pop/queue/q/partition/"+p+"?consumerGroup=g&autoAck=true", "", nil)
	}
	_, err := b.Pool.Exec(t.Context(), `DELETE FROM queen.log_segments s USING queen.partitions p
		WHERE s.partition_id = p.id AND p.name <> 'holds-messages'`)
	require.NoError(t, err)
	_, err = b.Pool.Exec(t.Context(), `UPDATE queen.partitions SET created_at = now() - interval '40 days',
		last_push_at = CASE WHEN name = 'pushed-lately' THEN now() ELSE now() - interval '40 days' END
		WHERE name <> 'Default'`)
	require.NoError(t, err)
	_, err = b.Pool.Exec(t.Context(), `UPDATE queen.cursors c SET last_consumed_at = CASE WHEN p.name = 'consumed-lately'
		THEN now() - interval '1 day' ELSE now() - interval '40 days' END FROM queen.partitions p WHERE p.id = c.partition_id`)
	require.NoError(t, err)

	require.EqualValues(t, 1, sweep(t, b).Partitions)
	require.Zero(t, b.Count(t, `SELECT count(*) FROM queen.partitions WHERE name = 'idle'`))
	require.Equal(t, 3, b.Count(t, `SELECT count(*) FROM queen.cursors`), "the idle partition's cursor went with it")
}

func TestIdlePartitionCleanupDeletesAtMostAThousandPerSweep(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	do(t, b, "POST", "/api/v1/configure", map[string]any{"queue": "q"})
	_, err := b.Pool.Exec(t.Context(), `INSERT INTO queen.partitions (id, queue_id, name, created_at)
		SELECT gen_random_uuid(), q.id, 'p' || g, now() - interval '40 days'
		  FROM queen.queues q, generate_series(1, 1005) g WHERE q.name = 'q'`)
	require.NoError(t, err)
	require.EqualValues(t, 1000, sweep(t, b).Partitions)
	require.EqualValues(t, 5, sweep(t, b).Partitions)
}

func TestEvictingALeasedBatchLetsItsGroupReadWhatFollowsAtOnce(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	configure(t, b, "q", map[string]any{"maxWaitTimeSeconds": 60, "leaseTime": 300})
	pushN(t, b, "q", 2) // offsets 0-1, to be evicted under a lease
	pushN(t, b, "q", 1) // offset 2, young
	resp := do(t, b, "GET", "/api/v1/pop/queue/q?batch=2&consumerGroup=g", nil)
	require.Len(t, resp.Map(t)["messages"], 2)
	require.Equal(t, http.StatusNoContent, b.Do(t, "GET", "/api/v1/pop/queue/q?consumerGroup=g", "", nil).Status,
		"leased for 300 s")
	age(t, b, "q", 2, time.Hour)

	parked := make(chan brokertest.Response, 1)
	go func() {
		parked <- b.Do(t, "GET", "/api/v1/pop/queue/q?batch=10&consumerGroup=g&wait=true&timeout=8000", "", nil)
	}()
	b.WaitParked(t, 1)
	require.EqualValues(t, 2, evict(t, b).Evicted)
	r := <-parked
	require.Equal(t, http.StatusOK, r.Status, "the parked pop is woken by the eviction, not the lease's end")
	require.Len(t, r.Map(t)["messages"], 1)
}
