package store

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/counters"
	"github.com/regent-mq/regent/broker/db"
)

// Ack applies acks in order on d (the pool or a transaction), in one
// round trip; dead letters cost one more, since the database cannot decode
// the payloads they keep. Once the acks have committed, the caller passes
// them and their results to AfterAck.
func (s *Store) Ack(ctx context.Context, d *db.DB, tenant string, acks []db.QueueAck) ([]db.AckResult, error) {
	var out []db.AckResult
	var err error
	if oneCursorCompleted(acks) {
		out, err = d.AckCursor(ctx, tenant, acks)
	} else {
		out, err = d.Ack(ctx, tenant, acks)
	}
	if err != nil {
		return nil, err
	}
	acked := map[string]int{}
	for i, r := range out {
		if r.Success && r.QueueName != nil && acks[i].Status == db.AckCompleted {
			acked[*r.QueueName]++
		}
		countAck(s.metrics.Ops, tenant, out[:i], r)
	}
	for q, n := range acked {
		s.metrics.Acked.WithLabelValues(tenant, q).Add(float64(n))
	}
	return out, nil
}

// countAck adds an ack's result to its queue's minute; the first result of
// a queue in a request counts the request.
func countAck(ops *counters.Counters, tenant string, before []db.AckResult, r db.AckResult) {
	if r.QueueName == nil {
		return // no such message: no queue to charge it to
	}
	q := *r.QueueName
	if !slices.ContainsFunc(before, func(e db.AckResult) bool { return e.QueueName != nil && *e.QueueName == q }) {
		ops.Add(tenant, q, counters.AckRequests, 1)
	}
	if r.Success {
		ops.Add(tenant, q, counters.AckSuccess, 1)
	} else {
		ops.Add(tenant, q, counters.AckFailed, 1)
	}
	if r.DLQ {
		ops.Add(tenant, q, counters.DeadLettered, 1)
	}
}

// AfterAck does what acks leave to do once they have committed: each
// release marks its partition in this replica's hot list at once (the
// consumer that acked usually pops again at once), and a release that left
// data to deliver is announced to every replica.
func (s *Store) AfterAck(acks []db.QueueAck, out []db.AckResult) {
	for i, r := range out {
		switch {
		case r.Announce:
			s.announcer.Announce(r.QueueID, acks[i].PartitionID)
		case r.Success && r.LeaseReleased && r.QueueID != uuid.Nil:
			s.hot.Mark(r.QueueID, acks[i].PartitionID)
		}
	}
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
