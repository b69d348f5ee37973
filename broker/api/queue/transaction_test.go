package queue_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

func TestTransactionRunsAllOperationsInOrder(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	in := b.Q("in")
	out := b.Q("out")
	b.Push(t, brokertest.Numbered(in, "Default", 0, 2)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+in+"?batch=2")
	resp := b.Do(t, "POST", "/api/v1/transaction", "", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": brokertest.Numbered(out, "Default", 10, 2)},
		map[string]any{"type": "ack", "transactionId": p.Messages[1].TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID},
	}})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	m := resp.Map(t)
	require.Equal(t, true, m["success"])
	require.NotEmpty(t, m["transactionId"])
	res := m["results"].([]any)
	require.Equal(t, "push", res[0].(map[string]any)["type"])
	require.Len(t, res[0].(map[string]any)["results"], 2)
	require.Equal(t, "ack", res[1].(map[string]any)["type"])
	require.Equal(t, true, res[1].(map[string]any)["success"])
	require.Equal(t, []int{10, 11}, b.Pop(t, "/api/v1/pop/queue/"+out+"?batch=5").Ns())
	c := b.Cursor(t, in)
	require.EqualValues(t, 2, c.Committed)
	require.Nil(t, c.LeaseID)
}

func TestTransactionWithAFailingOperationChangesNothing(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	in := b.Q("in")
	b.Push(t, brokertest.Numbered(in, "Default", 0, 2)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+in+"?batch=2")
	before := b.Stored(t, in)
	resp := b.Do(t, "POST", "/api/v1/transaction", "", map[string]any{"operations": []any{
		map[string]any{"type": "ack", "transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID},
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": in, "payload": 1, "transactionId": "t-new"}}},
		map[string]any{"type": "ack", "transactionId": "missing", "partitionId": p.PartitionID},
	}})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	m := resp.Map(t)
	require.Equal(t, false, m["success"])
	require.Contains(t, m["error"], "Message not found")
	require.Equal(t, before, b.Stored(t, in))
	require.Zero(t, before.Dedup)
	c := b.Cursor(t, in)
	require.Zero(t, c.Committed)
	require.NotNil(t, c.LeaseID)
	// The rolled-back transaction id is free again.
	out := b.Push(t, map[string]any{"queue": in, "payload": 1, "transactionId": "t-new"})
	require.Equal(t, "queued", out[0]["status"])
}

func TestTransactionDeadLetterInsideTheTransaction(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	in := b.Q("in")
	out := b.Q("out")
	b.Push(t, brokertest.Numbered(in, "Default", 0, 1)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+in)
	resp := b.Do(t, "POST", "/api/v1/transaction", "", map[string]any{"operations": []any{
		map[string]any{"type": "ack", "status": "dlq", "transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID},
		map[string]any{"type": "push", "items": brokertest.Numbered(out, "Default", 0, 1)},
	}})
	require.Equal(t, true, resp.Map(t)["success"], string(resp.Body))
	require.Equal(t, 1, b.Stored(t, in).DeadLetters)
}
