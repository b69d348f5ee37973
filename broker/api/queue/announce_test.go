package queue_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

// The common ack (all completed, one cursor, one lease) commits without
// NOTIFY; the broker announces its release once it has committed, on every
// route that acks, and only when the release left data to deliver.
//
// Not parallel, as the other listening test: the channel carries the
// announcements of every test on the package's database.
func TestAnAckReleasingDataLeftAnnouncesItToEveryReplicaAfterItsCommit(t *testing.T) {
	b := brokertest.Shared(t)
	q := b.Q("q")
	conn := pgtest.Listen(t, b.DatabaseURL, hotlist.Channel)
	// What a replica hears: want announcements, then nothing more.
	heard := func(want int) map[string]int { return pgtest.Heard(t, conn, want, 40*hotlist.Linger) }

	b.Push(t, brokertest.Numbered(q, "Default", 0, 8)...)
	partition := b.Announcement(t, q, "Default")
	require.Equal(t, map[string]int{partition: 1}, heard(1), "the push")

	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2")
	require.Empty(t, heard(0), "a pop announces nothing")
	r := ackLast(t, b, p, "")
	require.Equal(t, true, r["leaseReleased"])
	require.Equal(t, map[string]int{partition: 1}, heard(1), "an ack on /ack that leaves 6 messages")

	p = b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2")
	m := p.Messages[1]
	resp := b.Do(t, "POST", "/api/v1/transaction", "", map[string]any{"operations": []any{
		map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": p.LeaseID},
	}})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, true, resp.Map(t)["success"])
	require.Equal(t, map[string]int{partition: 1}, heard(1), "an ack in a transaction that leaves 4 messages")

	p = b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2")
	var batch []map[string]any
	for _, m := range p.Messages {
		batch = append(batch, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": p.LeaseID})
	}
	require.Equal(t, true, ackBatch(t, b, map[string]any{"acknowledgments": batch})[1]["leaseReleased"])
	require.Equal(t, map[string]int{partition: 1}, heard(1), "an ack on /ack/batch that leaves 2 messages")

	p = b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2")
	r = ackLast(t, b, p, "")
	require.Equal(t, true, r["leaseReleased"])
	require.Empty(t, heard(0), "an ack that leaves nothing to deliver")
}

// The general ack (several cursors, or a status other than completed) goes
// through queen.ack_v2, which leaves the announcements to the broker too:
// each release with data left is heard once, after the commit.
func TestAGeneralAckReleasingDataLeftAnnouncesItOnceAfterItsCommit(t *testing.T) {
	b := brokertest.Shared(t)
	q := b.Q("q")
	conn := pgtest.Listen(t, b.DatabaseURL, hotlist.Channel)
	heard := func(want int) map[string]int { return pgtest.Heard(t, conn, want, 40*hotlist.Linger) }
	b.Push(t, append(brokertest.Numbered(q, "a", 0, 3), brokertest.Numbered(q, "b", 3, 3)...)...)
	pa, pb := b.Announcement(t, q, "a"), b.Announcement(t, q, "b")
	require.Equal(t, map[string]int{pa: 1, pb: 1}, heard(2), "the push")

	var batch []map[string]any
	for _, part := range []string{"a", "b"} {
		p := b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/"+part+"?batch=1")
		m := p.Messages[0]
		batch = append(batch, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": p.LeaseID})
	}
	out := ackBatch(t, b, map[string]any{"acknowledgments": batch})
	require.Equal(t, true, out[0]["leaseReleased"])
	require.Equal(t, true, out[1]["leaseReleased"])
	require.Equal(t, map[string]int{pa: 1, pb: 1}, heard(2), "an ack/batch over two cursors")

	p := b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/a?batch=1")
	r := ack(t, b, map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID,
		"leaseId": p.LeaseID, "status": "failed"})
	require.Equal(t, true, r["leaseReleased"])
	require.Equal(t, map[string]int{pa: 1}, heard(1), "a failed ack")
}
