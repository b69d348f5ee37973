package queuestore

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/pg/db"
)

// Ack applies acks in order on d (the pool or a transaction), in one
// round trip; dead letters cost one more, since the database cannot decode
// the payloads they keep. Once the acks have committed, the caller applies
// what Acked says they leave to do.
func (s *Store) Ack(ctx context.Context, d *db.DB, tenant string, acks []db.QueueAck) ([]db.AckResult, error) {
	if oneCursorCompleted(acks) {
		return d.AckCursor(ctx, tenant, acks)
	}
	return d.Ack(ctx, tenant, acks)
}

// Acked is what committed acks leave to do: each release marks its
// partition in this replica's hot list at once (the consumer that acked
// usually pops again at once), a release that left data to deliver is
// announced to every replica, and each result is counted for its queue
// (the first of a queue in a request counts the request).
func Acked(tenant string, acks []db.QueueAck, out []db.AckResult) commit.After {
	var a commit.After
	for i, r := range out {
		switch {
		case r.Announce:
			a.Announce = append(a.Announce, commit.Partition{Queue: r.QueueID, Partition: acks[i].PartitionID})
		case r.Success && r.LeaseReleased && r.QueueID != uuid.Nil:
			a.Mark = append(a.Mark, commit.Partition{Queue: r.QueueID, Partition: acks[i].PartitionID})
		}
		if r.QueueName == nil {
			continue // no such message: no queue to charge it to
		}
		q := *r.QueueName
		if r.Success && acks[i].Status == db.AckCompleted {
			a.Acked = addCount(a.Acked, tenant, q)
		}
		if !slices.ContainsFunc(a.Ops, func(o commit.Op) bool { return o.Queue == q && o.Field == counters.AckRequests }) {
			a.Ops = append(a.Ops, commit.Op{Tenant: tenant, Queue: q, Field: counters.AckRequests, N: 1})
		}
		field := counters.AckFailed
		if r.Success {
			field = counters.AckSuccess
		}
		a.Ops = addOp(a.Ops, tenant, q, field)
		if r.DLQ {
			a.Ops = addOp(a.Ops, tenant, q, counters.DeadLettered)
		}
	}
	return a
}

// addOp adds one to the count of field for queue in ops: the results of
// a batch, usually of one queue, make a few operations, not one each.
func addOp(ops []commit.Op, tenant, queue string, field counters.Field) []commit.Op {
	for i := range ops {
		if ops[i].Queue == queue && ops[i].Field == field {
			ops[i].N++
			return ops
		}
	}
	return append(ops, commit.Op{Tenant: tenant, Queue: queue, Field: field, N: 1})
}

// addCount adds one message of queue to counts.
func addCount(counts []commit.Count, tenant, queue string) []commit.Count {
	for i := range counts {
		if counts[i].Queue == queue {
			counts[i].N++
			return counts
		}
	}
	return append(counts, commit.Count{Tenant: tenant, Queue: queue, N: 1})
}

// oneCursorCompleted reports the common case: a consumer acknowledging what
// it popped, all 'completed', on one partition and group, under one lease.
func oneCursorCompleted(acks []db.QueueAck) bool {
	for _, a := range acks {
		if a.Status != db.AckCompleted || a.PartitionID != acks[0].PartitionID || a.Group != acks[0].Group ||
			a.LeaseID != acks[0].LeaseID || a.HasLease != acks[0].HasLease {
			return false
		}
	}
	return len(acks) > 0
}
