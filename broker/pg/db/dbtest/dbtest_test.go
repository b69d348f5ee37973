package dbtest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

func TestCursorsReadsALeaseAndExpireLeasesEndsIt(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q, other := b.Q("q"), b.Q("other")
	b.PushN(t, q, "p", 0, 3)
	b.PushN(t, other, "p", 0, 1)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2&consumerGroup=g")
	b.Pop(t, "/api/v1/pop/queue/"+other)

	c := b.Cursor(t, q)
	require.Equal(t, "p", c.Partition)
	require.Equal(t, "g", c.Group)
	require.Equal(t, p.LeaseID, *c.LeaseID)
	require.Equal(t, new(int64(2)), c.BatchEnd)
	require.WithinDuration(t, time.Now().Add(5*time.Minute), *c.LeaseExpiresAt, time.Minute, "the default lease time")

	b.ExpireLeases(t, q)
	require.True(t, b.Cursor(t, q).LeaseExpiresAt.Before(time.Now()))
	require.Equal(t, []int{0, 1, 2}, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/p?batch=3&consumerGroup=g").Ns(),
		"redelivered at once")
	require.True(t, b.Cursor(t, other).LeaseExpiresAt.After(time.Now()), "another queue's lease is left alone")
}

func TestAgeMovesAQueuesTimesBackAndNoOtherQueues(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q, other := b.Q("q"), b.Q("other")
	b.PushN(t, q, "p", 0, 2)
	b.PushN(t, other, "p", 0, 1)
	created := func(queue string) []time.Time {
		var out []time.Time
		for _, f := range b.Frames(t, b.Tenant, queue) {
			out = append(out, time.UnixMicro(f.CreatedAt))
		}
		return out
	}
	before, untouched := created(q), created(other)
	b.Age(t, q, time.Hour)
	after := created(q)
	require.Len(t, after, 2)
	for i := range after {
		require.Equal(t, time.Hour, before[i].Sub(after[i]), "frame %d", i)
	}
	require.Equal(t, untouched, created(other))
	// The frames still decode, and a pop of them counts the hour as lag.
	require.Equal(t, []int{0, 1}, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2").Ns())
}

func TestQueueReadsWhatAQueueHoldsAndZeroForNone(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	require.Equal(t, dbtest.Queue{}, b.Stored(t, q))
	b.Call(t, 200, "POST", "/api/v1/configure", map[string]any{"queue": q, "options": map[string]any{"leaseTime": 7, "priority": 3}})
	b.PushN(t, q, "a", 0, 2)
	b.PushN(t, q, "b", 0, 1)
	s := b.Stored(t, q)
	require.True(t, s.Exists)
	require.Equal(t, 7, s.LeaseTime)
	require.Equal(t, 3, s.Priority)
	require.Len(t, s.Partitions, 3, "Default, a and b")
	require.Equal(t, 2, s.Segments)
	require.Equal(t, 3, s.Frames)
	require.EqualValues(t, 3, s.NextOffset)

	b.DropSegment(t, q, 0)
	require.Equal(t, 0, b.Stored(t, q).Segments)
	require.Error(t, b.DB.DropSegment(t.Context(), b.Tenant, q, 0), "no segment is left to drop")

	b.AddPartitions(t, q, 10)
	require.Len(t, b.Stored(t, q).Partitions, 13)
}

func TestLeftoversCountsTheRowsOfADeletedQueue(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, map[string]any{"queue": q, "payload": 1, "transactionId": "x"})
	p := b.Pop(t, "/api/v1/pop/queue/"+q)
	id := b.Stored(t, q).ID
	require.Equal(t, map[string]int{"queues": 1, "partitions": 1, "log_segments": 1, "cursors": 1, "push_dedup": 1},
		b.Leftovers(t, id, p.PartitionID))
	b.Call(t, 200, "DELETE", "/api/v1/resources/queues/"+q, nil)
	require.Empty(t, b.Leftovers(t, id, p.PartitionID))
}

func TestQuietHoldsAndFreesAWindowBufferedPartition(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Call(t, 200, "POST", "/api/v1/configure", map[string]any{"queue": q, "options": map[string]any{"windowBuffer": 60}})
	b.PushN(t, q, "Default", 0, 1)
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/Default"))
	b.Quiet(t, q, "Default", 2*time.Minute)
	require.Equal(t, []int{0}, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/Default").Ns())
}

func TestRaiseFloorHidesWhatLiesBelowIt(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "Default", 0, 4)
	b.RaiseFloor(t, q, 2)
	require.Equal(t, []int{2, 3}, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/Default?batch=10&autoAck=true").Ns())
}

func TestLockPartitionsHoldsAPushUntilReleased(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t) // LockWaiters counts the whole database's waiters
	b.PushN(t, "q", "Default", 0, 1)
	release, err := b.DB.LockPartitions(t.Context(), b.Tenant, "q")
	require.NoError(t, err)
	pushed := make(chan error, 1)
	go func() {
		_, err := b.Send("POST", "/api/v1/push", "", map[string]any{"items": brokertest.Numbered("q", "Default", 1, 1)})
		pushed <- err
	}()
	brokertest.Eventually(t, 10*time.Second, func() error {
		if n, err := b.DB.LockWaiters(t.Context()); err != nil || n == 0 {
			return fmt.Errorf("no push waits for the lock (%v)", err)
		}
		return nil
	})
	require.NoError(t, release())
	require.NoError(t, <-pushed)
	require.Equal(t, 2, b.Stored(t, "q").Frames)
}

func TestReplicaSamplesAgeAndForget(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t) // samples are the database's, not a queue's
	brokertest.Eventually(t, 10*time.Second, func() error {
		if n, err := b.DB.ReplicaSamples(t.Context()); err != nil || n == 0 {
			return fmt.Errorf("no sample yet (%v)", err)
		}
		return nil
	})
	require.NoError(t, b.DB.AgeReplica(t.Context(), "", time.Hour))
	require.NoError(t, b.DB.ForgetReplicas(t.Context()))
	n, err := b.DB.ReplicaSamples(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestSetRetriesAndEmptyPartitionTouchOnlyTheOneNamed(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "a", 0, 2)
	b.PushN(t, q, "b", 0, 2)
	b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/a?batch=1&consumerGroup=g")
	b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/b?batch=1&consumerGroup=g")
	require.NoError(t, b.DB.SetRetries(t.Context(), b.Tenant, q, "a", "g", 2))
	require.Error(t, b.DB.SetRetries(t.Context(), b.Tenant, q, "a", "nobody", 2))
	retries := map[string]int{}
	for _, c := range b.Cursors(t, q) {
		retries[c.Partition] = c.RetryCount
	}
	require.Equal(t, map[string]int{"a": 2, "b": 0}, retries)

	require.NoError(t, b.DB.EmptyPartition(t.Context(), b.Tenant, q, "a"))
	parts, err := b.Log(t.Context(), b.Tenant, q)
	require.NoError(t, err)
	require.Len(t, parts, 1)
	require.Equal(t, "b", parts[0].Name)
}

func TestStreamsArrangementsReadAndWriteOnlyTheQueryNamed(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	if b.Tenant != auth.DefaultTenant {
		r := b.Do(t, "POST", "/streams/v1/queries", "", map[string]any{"name": b.Q("q"), "source_queue": b.Q("src"), "config_hash": "h"})
		require.Equal(t, 403, r.Status, "no grant yet: %s", r.Body)
		b.Grant(t, b.Tenant, nil)
	}
	register := func(name, sink string) string {
		r := b.Call(t, 200, "POST", "/streams/v1/queries", map[string]any{"name": b.Q(name), "source_queue": b.Q("src"), "sink_queue": sink, "config_hash": "h"})
		return r.Map(t)["query_id"].(string)
	}
	q, other := register("q", b.Q("out")), register("other", "")
	require.Equal(t, dbtest.StreamQuery{Exists: true, Tenant: b.Tenant, Name: b.Q("q"), Source: b.Q("src"), Sink: new(b.Q("out")), ConfigHash: "h"},
		b.StreamQuery(t, q))
	require.Nil(t, b.StreamQuery(t, other).Sink)
	require.Equal(t, dbtest.StreamQuery{}, b.StreamQuery(t, uuid.NewString()))
	require.Equal(t, 1, b.StreamQueries(t, b.Q("q")))
	require.Equal(t, 0, b.StreamQueries(t, b.Q("none")))

	p1, p2 := uuid.NewString(), uuid.NewString()
	b.PutState(t, q, p1, "a", `{"n": 1}`)
	b.PutState(t, q, p2, "b", `{"n": 2}`)
	b.PutState(t, other, p1, "c", `{}`)
	require.Equal(t, map[string]string{"a": `{"n": 1}`}, b.State(t, q, p1))
	require.Equal(t, map[string]string{"a": `{"n": 1}`, "b": `{"n": 2}`}, b.State(t, q, ""))
	require.Equal(t, 2, b.StateRows(t, q))

	src := b.Q("src")
	b.Call(t, 200, "POST", "/api/v1/configure", map[string]any{"queue": src})
	b.PlaceCursor(t, src, "Default", "streams.q", 17)
	c := b.Cursor(t, src)
	require.Equal(t, dbtest.Cursor{Partition: "Default", Group: "streams.q", Committed: 17, TotalConsumed: 17}, c)
	b.PlaceCursor(t, src, "Default", "streams.q", 3)
	require.Equal(t, int64(3), b.Cursor(t, src).Committed)
	require.Error(t, b.DB.PlaceCursor(t.Context(), b.Tenant, src, "none", "g", 1))
}

func TestDropLeasesSetConsumedAndForgetCursorsTouchOnlyTheQueueNamed(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q, other := b.Q("q"), b.Q("other")
	b.PushN(t, q, "p", 0, 2)
	b.PushN(t, other, "p", 0, 1)
	b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/p?batch=2")
	b.Pop(t, "/api/v1/pop/queue/"+other+"/partition/p")

	require.NoError(t, b.DB.SetConsumed(t.Context(), b.Tenant, q, "p", dbtest.QueueMode, 100))
	require.Error(t, b.DB.SetConsumed(t.Context(), b.Tenant, q, "p", "nobody", 1))
	b.DropLeases(t, q)
	c := b.Cursor(t, q)
	require.Nil(t, c.LeaseID)
	require.Nil(t, c.LeaseExpiresAt)
	require.Equal(t, int64(100), c.TotalConsumed)
	require.NotNil(t, b.Cursor(t, other).LeaseID, "another queue's lease is left alone")
	require.Equal(t, []int{0, 1}, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/p?batch=2").Ns(), "no lease holds the batch")

	b.ForgetCursors(t, q)
	require.Empty(t, b.Cursors(t, q))
	require.Len(t, b.Cursors(t, other), 1)
}
