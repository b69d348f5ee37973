package queue_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

// The common ack (all completed, one cursor, one lease) commits without
// NOTIFY; the broker announces its release once it has committed, on every
// route that acks, and only when the release left data to deliver.
func TestAnAckReleasingDataLeftAnnouncesItToEveryReplicaAfterItsCommit(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	conn := pgtest.Listen(t, b.DatabaseURL, hotlist.Channel)
	// What a replica hears until nothing more comes.
	heard := func() map[string]int { return pgtest.Heard(t, conn, 40*hotlist.Linger) }

	push(t, b, msgs("q", "Default", 0, 8)...)
	var partition string
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT q.id::text || ':' || p.id::text FROM queen.partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'q'`).Scan(&partition))
	require.Equal(t, map[string]int{partition: 1}, heard(), "the push")

	p := pop(t, b, "/api/v1/pop/queue/q?batch=2")
	require.Empty(t, heard(), "a pop announces nothing")
	r := ackLast(t, b, p, "")
	require.Equal(t, true, r["leaseReleased"])
	require.Equal(t, map[string]int{partition: 1}, heard(), "an ack on /ack that leaves 6 messages")

	p = pop(t, b, "/api/v1/pop/queue/q?batch=2")
	m := p.Messages[1]
	resp := b.Do(t, "POST", "/api/v1/transaction", "", map[string]any{"operations": []any{
		map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": p.LeaseID},
	}})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, true, resp.Map(t)["success"])
	require.Equal(t, map[string]int{partition: 1}, heard(), "an ack in a transaction that leaves 4 messages")

	p = pop(t, b, "/api/v1/pop/queue/q?batch=2")
	var batch []map[string]any
	for _, m := range p.Messages {
		batch = append(batch, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": p.LeaseID})
	}
	require.Equal(t, true, ackBatch(t, b, map[string]any{"acknowledgments": batch})[1]["leaseReleased"])
	require.Equal(t, map[string]int{partition: 1}, heard(), "an ack on /ack/batch that leaves 2 messages")

	p = pop(t, b, "/api/v1/pop/queue/q?batch=2")
	r = ackLast(t, b, p, "")
	require.Equal(t, true, r["leaseReleased"])
	require.Empty(t, heard(), "an ack that leaves nothing to deliver")
}
