package queue_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestPushReturns201WithTopLevelArrayInItemOrder(t *testing.T) {
	b := brokertest.Shared(t)
	orders := b.Q("orders")
	out := b.Push(t, map[string]any{"queue": orders, "payload": map[string]any{"a": 1}, "transactionId": "t1"}, map[string]any{"queue": orders, "partition": "p2", "data": "x", "traceId": "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"})
	require.Len(t, out, 2)
	require.EqualValues(t, 0, out[0]["index"])
	require.Equal(t, "t1", out[0]["transaction_id"])
	require.Equal(t, "queued", out[0]["status"])
	require.Equal(t, orders, out[0]["queueName"])
	require.Nil(t, out[0]["trace_id"])
	require.EqualValues(t, 1, out[1]["index"])
	require.Equal(t, out[1]["message_id"], out[1]["transaction_id"], "transactionId defaults to the message id")
	require.Equal(t, "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f", out[1]["trace_id"])
	require.NotEqual(t, out[0]["partition_id"], out[1]["partition_id"])
	require.Equal(t, 2, b.Stored(t, orders).Segments)
}

func TestPushEmptyItemsIs201EmptyArray(t *testing.T) {
	b := brokertest.Shared(t)
	resp := b.Do(t, "POST", "/api/v1/push", "", `{"items": []}`)
	require.Equal(t, http.StatusCreated, resp.Status)
	require.JSONEq(t, `[]`, string(resp.Body))
}

func TestPushOneSegmentPerPartitionPerRequest(t *testing.T) {
	b := brokertest.Shared(t)
	q := b.Q("q")
	items := append(brokertest.Numbered(q, "a", 0, 5), brokertest.Numbered(q, "b", 0, 3)...)
	items = append(items, brokertest.Numbered(q, "a", 5, 2)...)
	b.Push(t, items...)
	require.Equal(t, 2, b.Stored(t, q).Segments, "one per partition")
	parts, err := b.Log(t.Context(), b.Tenant, q)
	require.NoError(t, err)
	var counts []int
	for _, p := range parts {
		counts = append(counts, len(p.Frames))
	}
	require.Equal(t, []int{7, 3}, counts)
}

func TestPushDuplicateTransactionIDInSamePartition(t *testing.T) {
	b := brokertest.Shared(t)
	q := b.Q("q")
	first := b.Push(t, map[string]any{"queue": q, "payload": 1, "transactionId": "dup"})
	out := b.Push(t, map[string]any{"queue": q, "payload": 2, "transactionId": "dup"}, map[string]any{"queue": q, "payload": 3, "transactionId": "fresh"}, map[string]any{"queue": q, "payload": 4, "transactionId": "fresh"})
	require.Equal(t, "duplicate", out[0]["status"])
	require.Equal(t, first[0]["message_id"], out[0]["message_id"], "a duplicate answers the existing message id")
	require.Equal(t, "queued", out[1]["status"])
	require.Equal(t, "duplicate", out[2]["status"], "a repeat inside one request is a duplicate too")
	require.Equal(t, out[1]["message_id"], out[2]["message_id"])
	require.Equal(t, 2, b.Stored(t, q).Frames)
}

// queue-admin-api.md §8: a repeat within the queue's dedupWindowSeconds is a
// duplicate, and after it the id is new again and the message stored, even
// before the sweep has removed the old record.
func TestADuplicateAfterItsQueuesDedupWindowIsStoredAgain(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	configure := func(queue string, window any) {
		r := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": b.Q(queue), "options": map[string]any{"dedupWindowSeconds": window}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	}
	configure("short", 60)
	configure("none", 0)
	configure("long", nil) // the broker's window, an hour
	push := func(queue string) map[string]any {
		return b.Push(t, map[string]any{"queue": b.Q(queue), "payload": 1, "transactionId": "tx"})[0]
	}
	first := map[string]map[string]any{}
	for _, q := range []string{"short", "none", "long"} {
		first[q] = push(q)
		require.Equal(t, "queued", first[q]["status"])
	}
	b.Age(t, b.Q("short"), 30*time.Second)
	require.Equal(t, "duplicate", push("short")["status"], "within its window")
	require.Equal(t, "queued", push("none")["status"], "a window of 0 remembers nothing")
	for _, q := range []string{"short", "long"} {
		b.Age(t, b.Q(q), 2*time.Minute)
	}
	again := push("short")
	require.Equal(t, "queued", again["status"], "after its window")
	require.NotEqual(t, first["short"]["message_id"], again["message_id"])
	require.Equal(t, "duplicate", push("long")["status"], "the other queue's window is the broker's hour")
	require.Equal(t, "duplicate", push("short")["status"], "the new record starts a new window")
	require.Equal(t, 2, b.Stored(t, b.Q("short")).Frames)
}

// minuteDedup is the broker of the tests of the broker's --dedup-window.
var minuteDedup = brokertest.NewGroup(func(c *config.Config) { c.DedupWindow = time.Minute })

func TestTheBrokersDedupWindowIsTheWindowOfQueuesThatSetNone(t *testing.T) {
	t.Parallel()
	b := minuteDedup.Shared(t)
	own, pushed := b.Q("own"), b.Q("pushed")
	r := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": own, "options": map[string]any{"dedupWindowSeconds": 3600}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	for _, q := range []string{own, pushed} { // pushed: created by its first push
		b.Push(t, map[string]any{"queue": q, "payload": 1, "transactionId": "tx"})
		b.Age(t, q, 2*time.Minute)
	}
	require.Equal(t, "queued", b.Push(t, map[string]any{"queue": pushed, "payload": 1, "transactionId": "tx"})[0]["status"])
	require.Equal(t, "duplicate", b.Push(t, map[string]any{"queue": own, "payload": 1, "transactionId": "tx"})[0]["status"])
}

func TestPushSameTransactionIDInAnotherPartitionIsNotDuplicate(t *testing.T) {
	b := brokertest.Shared(t)
	q := b.Q("q")
	q2 := b.Q("q2")
	out := b.Push(t, map[string]any{"queue": q, "partition": "a", "payload": 1, "transactionId": "same"}, map[string]any{"queue": q, "partition": "b", "payload": 1, "transactionId": "same"})
	require.Equal(t, "queued", out[0]["status"])
	require.Equal(t, "queued", out[1]["status"])
	out = b.Push(t, map[string]any{"queue": q2, "partition": "a", "payload": 1, "transactionId": "same"})
	require.Equal(t, "queued", out[0]["status"])
}
