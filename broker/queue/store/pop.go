package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/catalog"
	"github.com/regent-mq/regent/broker/commit"
	"github.com/regent-mq/regent/broker/counters"
	"github.com/regent-mq/regent/broker/db"
	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/broker/ids"
	"github.com/regent-mq/regent/broker/segment"
)

// extraCandidates are tried beyond the partitions wanted, in the same call,
// in case competing consumers took the first ones.
const extraCandidates = 4

// PopRequest is a validated pop.
type PopRequest struct {
	Tenant     string
	Queue      string
	Partition  string // "" on the queue-wide route
	Group      string
	Batch      int
	Partitions int
	AutoAck    bool
	SubStart   string // 'all', 'now' or an RFC 3339 time
}

// Popped is what one pop attempt found. With no messages, Wake is closed
// by the next mark of the queue, and Due (when set) is when a deferred
// partition becomes due.
type Popped struct {
	Messages []Message
	Claims   []db.PopClaim
	LeaseID  uuid.UUID
	Wake     <-chan struct{}
	Due      time.Time
}

// Message is a delivered message (broker/queue writes its wire form).
type Message struct {
	ID            uuid.UUID
	TransactionID string
	TraceID       *string
	Traceparent   string // W3C trace context of the push; "" for none
	Data          []byte // raw JSON
	ProducerSub   *string
	CreatedAt     int64 // µs since the epoch
	PartitionID   uuid.UUID
	Partition     string
	LeaseID       string
	ConsumerGroup string
}

// Pop makes one attempt at p. The claim runs to its end even if the client
// leaves meanwhile, since a claim cut short would leave its outcome
// unknown; a claim whose client left is released.
func (s *Store) Pop(ctx context.Context, p *PopRequest) (Popped, error) {
	q, err := s.catalog.LookupQueue(ctx, p.Tenant, p.Queue)
	if errors.Is(err, catalog.ErrNotFound) {
		return Popped{Wake: s.hot.Wait(uuid.Nil)}, nil
	}
	if err != nil {
		return Popped{}, err
	}
	// Taken before looking, so that a mark that lands while this attempt
	// runs still wakes the wait that follows it.
	idle := Popped{Wake: s.hot.Wait(q.ID)}

	var cands []hotlist.Candidate
	var parts []uuid.UUID
	if p.Partition != "" {
		part, err := s.catalog.LookupPartition(ctx, p.Tenant, p.Queue, p.Partition)
		if errors.Is(err, catalog.ErrNotFound) {
			return idle, nil
		}
		if err != nil {
			return Popped{}, err
		}
		parts = []uuid.UUID{part.ID}
	} else {
		if !s.hot.Seeded(q.ID, p.Group) {
			if err := s.seed(ctx, q.ID, p.Group); err != nil {
				return Popped{}, err
			}
		}
		cands, idle.Due = s.hot.Candidates(q.ID, p.Group, p.Partitions+extraCandidates, time.Now())
		if len(cands) == 0 {
			return idle, nil
		}
		parts = make([]uuid.UUID, len(cands))
		for i, c := range cands {
			parts[i] = c.ID
		}
	}

	var leaseID uuid.UUID // none: auto-ack
	if !p.AutoAck {
		leaseID = ids.New()
	}
	claims, outcomes, err := s.claim(context.WithoutCancel(ctx), p, q, parts, leaseID)
	if err != nil {
		return Popped{}, err
	}
	for i, o := range outcomes {
		if cands != nil {
			s.hot.Settle(q.ID, p.Group, cands[i], o.Outcome, o.RetryAt)
		}
		// A deferred partition (a lease, a retryDelay, delayedProcessing or
		// windowBuffer) wakes a long-poll when it is due, since no push may
		// come to wake it.
		if o.Outcome == hotlist.Busy && !o.RetryAt.IsZero() && (idle.Due.IsZero() || o.RetryAt.Before(idle.Due)) {
			idle.Due = o.RetryAt
		}
	}
	if len(claims) == 0 {
		return idle, nil
	}
	if ctx.Err() != nil && !p.AutoAck {
		s.release(context.WithoutCancel(ctx), leaseID)
		return Popped{}, ctx.Err()
	}
	msgs, ends, err := s.decode(q, claims, p, leaseID)
	if err == nil {
		claims, err = s.trimDeleted(context.WithoutCancel(ctx), p, q, leaseID, claims, ends)
	}
	if err != nil {
		if !p.AutoAck {
			s.release(context.WithoutCancel(ctx), leaseID)
		}
		return Popped{}, err
	}
	s.metrics.Popped.WithLabelValues(q.Tenant, q.Name).Add(float64(len(msgs)))
	s.quotas.Popped(q.Tenant, len(msgs))
	var lagSum, lagMax int64
	nowUS := time.Now().UnixMicro()
	for _, m := range msgs {
		lag := max(nowUS-m.CreatedAt, 0) / 1000
		lagSum, lagMax = lagSum+lag, max(lagMax, lag)
	}
	s.metrics.Ops.Popped(q.Tenant, q.Name, int64(len(msgs)), lagSum, lagMax)
	if p.AutoAck {
		// The pop is its own ack: the analytics count it as an ack request
		// whose items all succeeded (queue-admin-api.md §3, §4: processed
		// includes autoAck).
		s.metrics.Ops.Add(q.Tenant, q.Name, counters.AckRequests, 1)
		s.metrics.Ops.Add(q.Tenant, q.Name, counters.AckSuccess, int64(len(msgs)))
	}
	return Popped{Messages: msgs, Claims: claims, LeaseID: leaseID, Wake: idle.Wake, Due: idle.Due}, nil
}

// claim calls queen.pop and returns the claimed partitions with their
// segments, and the outcome of each candidate it looked at, in order.
func (s *Store) claim(ctx context.Context, p *PopRequest, q *catalog.Queue, ids []uuid.UUID, leaseID uuid.UUID) ([]db.PopClaim, []db.PopLook, error) {
	claims, looks, gone, err := s.db.Pop(ctx, &db.PopCall{Tenant: p.Tenant, Queue: p.Queue, QueueID: q.ID,
		Group: p.Group, Partitions: p.Partitions, Batch: p.Batch, LeaseID: leaseID, SubStart: p.SubStart, MaxBytes: s.maxPopBytes}, ids)
	if gone {
		s.catalog.Invalidate(p.Tenant, p.Queue)
		s.hot.Forget(q.ID)
	}
	return claims, looks, err
}

// decode turns the claimed segments into messages: only the frames inside
// each batch, payloads opened when sealed, and never a frame that DELETE
// /api/v1/messages marked deleted. ends are where each claim's delivered
// messages end: its batch start when it delivered none.
func (s *Store) decode(q *catalog.Queue, claims []db.PopClaim, p *PopRequest, leaseID uuid.UUID) (msgs []Message, ends []int64, err error) {
	lease := ""
	if !p.AutoAck {
		lease = leaseID.String()
	}
	n := 0
	for _, c := range claims {
		n += int(c.BatchEnd - c.BatchStart)
	}
	msgs = make([]Message, 0, n)
	ends = make([]int64, len(claims))
	for k, c := range claims {
		ends[k] = c.BatchStart
		for j := range c.Segments {
			sg := &c.Segments[j]
			frames, err := segment.Decode(sg.Body, uint64(sg.Checksum), sg.Count)
			if err != nil {
				return nil, nil, fmt.Errorf("queue %q partition %s segment %d: %w", q.Name, c.ID, sg.Base, err)
			}
			// The frames hold their own copy: the stored body can go now,
			// not with the answer.
			sg.Body = nil
			for i := range frames {
				off := sg.Base + int64(i)
				f := &frames[i]
				if off < c.BatchStart || off >= c.BatchEnd || f.Deleted() {
					continue
				}
				ends[k] = off + 1
				payload, err := s.open(f)
				if err != nil {
					return nil, nil, fmt.Errorf("queue %q partition %s offset %d: %w", q.Name, c.ID, off, err)
				}
				m := Message{
					ID: f.ID, TransactionID: f.TransactionID, Traceparent: f.Traceparent, Data: payload,
					CreatedAt: f.CreatedAt, PartitionID: c.ID, Partition: c.Name,
					LeaseID: lease, ConsumerGroup: p.Group,
				}
				if f.TraceID != "" {
					m.TraceID = &f.TraceID
				}
				if f.ProducerSub != "" {
					m.ProducerSub = &f.ProducerSub
				}
				msgs = append(msgs, m)
			}
		}
	}
	return msgs, ends, nil
}

// trimDeleted ends each leased batch whose last frames were deleted at its
// last delivered message, so that acking what was delivered releases the
// lease, and consumes at once a batch that delivered nothing (auto-ack has
// moved past them already). It returns the claims that delivered something.
func (s *Store) trimDeleted(ctx context.Context, p *PopRequest, q *catalog.Queue, leaseID uuid.UUID, claims []db.PopClaim, ends []int64) ([]db.PopClaim, error) {
	var ids []uuid.UUID
	var at []int64
	kept := claims[:0:0]
	for i, c := range claims {
		if ends[i] < c.BatchEnd {
			ids, at = append(ids, c.ID), append(at, ends[i])
		}
		if ends[i] > c.BatchStart {
			kept = append(kept, c)
		}
	}
	if len(ids) == 0 || p.AutoAck {
		return kept, nil
	}
	released, err := s.db.EndBatches(ctx, p.Group, leaseID, ids, at)
	if err != nil {
		return nil, fmt.Errorf("queue %q: end batches at their deleted messages: %w", q.Name, err)
	}
	var a commit.After
	for _, pid := range released {
		a.Announce = append(a.Announce, commit.Partition{Queue: q.ID, Partition: pid})
	}
	s.after.Apply(a)
	return kept, nil
}

// open returns a frame's plaintext payload.
func (s *Store) open(f *segment.Frame) ([]byte, error) {
	if !f.Sealed() {
		return f.Payload, nil
	}
	return s.sealer.Open(f.Payload[:0], f.Payload, f.KeyID)
}

// release gives back the leases of a pop whose answer nobody will read, and
// announces the partitions so that other consumers pick them up.
func (s *Store) release(ctx context.Context, leaseID uuid.UUID) {
	released, err := s.db.ReleaseLease(ctx, leaseID)
	if err != nil {
		s.logger.Error("release the lease of an abandoned pop", "lease_id", leaseID, "err", err)
		return
	}
	// The statement has committed once its rows are read.
	var a commit.After
	for _, r := range released {
		a.Announce = append(a.Announce, commit.Partition{Queue: r.Queue, Partition: r.Partition})
	}
	s.after.Apply(a)
}
