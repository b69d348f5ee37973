package queue_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/test/brokertest"
)

// heard collects what a LISTEN on the log's channel, as another replica
// holds, receives until nothing more arrives for a while.
func heard(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	var got []string
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 40*hotlist.Linger)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return got
		}
		require.NoError(t, err)
		got = append(got, n.Payload)
	}
}

// The common ack (all completed, one cursor, one lease) commits without
// NOTIFY; the broker announces its release once it has committed, on every
// route that acks, and only when the release left data to deliver.
func TestAnAckReleasingDataLeftAnnouncesItToEveryReplicaAfterItsCommit(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	conn, err := pgx.Connect(t.Context(), b.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), "LISTEN "+hotlist.Channel)
	require.NoError(t, err)

	push(t, b, msgs("q", "Default", 0, 8)...)
	var partition string
	require.NoError(t, b.Pool.QueryRow(t.Context(), `SELECT q.id::text || ':' || p.id::text FROM queen.partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'q'`).Scan(&partition))
	require.Equal(t, []string{partition}, heard(t, conn), "the push")

	p := pop(t, b, "/api/v1/pop/queue/q?batch=2")
	require.Empty(t, heard(t, conn), "a pop announces nothing")
	r := ackLast(t, b, p, "")
	require.Equal(t, true, r["leaseReleased"])
	require.Equal(t, []string{partition}, heard(t, conn), "an ack on /ack that leaves 6 messages")

	p = pop(t, b, "/api/v1/pop/queue/q?batch=2")
	m := p.Messages[1]
	resp := b.Do(t, "POST", "/api/v1/transaction", "", map[string]any{"operations": []any{
		map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": p.LeaseID},
	}})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, true, resp.Map(t)["success"])
	require.Equal(t, []string{partition}, heard(t, conn), "an ack in a transaction that leaves 4 messages")

	p = pop(t, b, "/api/v1/pop/queue/q?batch=2")
	var batch []map[string]any
	for _, m := range p.Messages {
		batch = append(batch, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": p.LeaseID})
	}
	require.Equal(t, true, ackBatch(t, b, map[string]any{"acknowledgments": batch})[1]["leaseReleased"])
	require.Equal(t, []string{partition}, heard(t, conn), "an ack on /ack/batch that leaves 2 messages")

	p = pop(t, b, "/api/v1/pop/queue/q?batch=2")
	r = ackLast(t, b, p, "")
	require.Equal(t, true, r["leaseReleased"])
	require.Empty(t, heard(t, conn), "an ack that leaves nothing to deliver")
}
