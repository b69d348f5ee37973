package queue_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

func TestPushReturns201WithTopLevelArrayInItemOrder(t *testing.T) {
	b := brokertest.Start(t)
	out := b.Push(t, map[string]any{"queue": "orders", "payload": map[string]any{"a": 1}, "transactionId": "t1"}, map[string]any{"queue": "orders", "partition": "p2", "data": "x", "traceId": "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"})
	require.Len(t, out, 2)
	require.EqualValues(t, 0, out[0]["index"])
	require.Equal(t, "t1", out[0]["transaction_id"])
	require.Equal(t, "queued", out[0]["status"])
	require.Equal(t, "orders", out[0]["queueName"])
	require.Nil(t, out[0]["trace_id"])
	require.EqualValues(t, 1, out[1]["index"])
	require.Equal(t, out[1]["message_id"], out[1]["transaction_id"], "transactionId defaults to the message id")
	require.Equal(t, "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f", out[1]["trace_id"])
	require.NotEqual(t, out[0]["partition_id"], out[1]["partition_id"])
	require.Equal(t, 2, b.Count(t, "SELECT count(*) FROM queen.log_segments"))
}

func TestPushEmptyItemsIs201EmptyArray(t *testing.T) {
	b := brokertest.Start(t)
	resp := b.Do(t, "POST", "/api/v1/push", "", `{"items": []}`)
	require.Equal(t, http.StatusCreated, resp.Status)
	require.JSONEq(t, `[]`, string(resp.Body))
}

func TestPushOneSegmentPerPartitionPerRequest(t *testing.T) {
	b := brokertest.Start(t)
	items := append(brokertest.Numbered("q", "a", 0, 5), brokertest.Numbered("q", "b", 0, 3)...)
	items = append(items, brokertest.Numbered("q", "a", 5, 2)...)
	b.Push(t, items...)
	var counts []int32
	rows, err := b.Pool.Query(t.Context(), `SELECT s.frame_count FROM queen.log_segments s JOIN queen.partitions p ON p.id = s.partition_id ORDER BY p.name`)
	require.NoError(t, err)
	for rows.Next() {
		var n int32
		require.NoError(t, rows.Scan(&n))
		counts = append(counts, n)
	}
	require.Equal(t, []int32{7, 3}, counts)
}

func TestPushDuplicateTransactionIDInSamePartition(t *testing.T) {
	b := brokertest.Start(t)
	first := b.Push(t, map[string]any{"queue": "q", "payload": 1, "transactionId": "dup"})
	out := b.Push(t, map[string]any{"queue": "q", "payload": 2, "transactionId": "dup"}, map[string]any{"queue": "q", "payload": 3, "transactionId": "fresh"}, map[string]any{"queue": "q", "payload": 4, "transactionId": "fresh"})
	require.Equal(t, "duplicate", out[0]["status"])
	require.Equal(t, first[0]["message_id"], out[0]["message_id"], "a duplicate answers the existing message id")
	require.Equal(t, "queued", out[1]["status"])
	require.Equal(t, "duplicate", out[2]["status"], "a repeat inside one request is a duplicate too")
	require.Equal(t, out[1]["message_id"], out[2]["message_id"])
	require.Equal(t, 2, b.Count(t, "SELECT coalesce(sum(frame_count), 0)::int FROM queen.log_segments"))
}

func TestPushSameTransactionIDInAnotherPartitionIsNotDuplicate(t *testing.T) {
	b := brokertest.Start(t)
	out := b.Push(t, map[string]any{"queue": "q", "partition": "a", "payload": 1, "transactionId": "same"}, map[string]any{"queue": "q", "partition": "b", "payload": 1, "transactionId": "same"})
	require.Equal(t, "queued", out[0]["status"])
	require.Equal(t, "queued", out[1]["status"])
	out = b.Push(t, map[string]any{"queue": "q2", "partition": "a", "payload": 1, "transactionId": "same"})
	require.Equal(t, "queued", out[0]["status"])
}
