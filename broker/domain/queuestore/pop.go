package queuestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/broker/domain/ids"
	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/broker/pg/db"
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
	// Final: no attempt follows an empty answer (wait=false), so it must
	// mean that no partition holds a message visible to the group.
	Final bool

	waiter *hotlist.Waiter // the pop's place in line for a wake-up
}

// line puts the pop at the end of the line for its next wake-up, leaving
// its previous place, and returns the partition that woke it (uuid.Nil:
// none), which this attempt tries first.
func (p *PopRequest) line(w *hotlist.Waiter) uuid.UUID {
	woken := p.waiter.Take()
	p.waiter = w
	return woken
}

// Leave gives up the pop's place in line once it has its answer; a
// wake-up it got and did not use goes to the next pop.
func (p *PopRequest) Leave() {
	p.waiter.Leave()
	p.waiter = nil
}

// Popped is what one pop attempt found. With no messages, Wake is closed
// when a mark wakes the pop (hotlist.Waiter), and Due (when set) is when a
// deferred partition becomes due.
type Popped struct {
	Messages []Message
	Claims   []db.PopClaim
	LeaseID  uuid.UUID
	Wake     <-chan struct{}
	Due      time.Time
}

// Message is a delivered message (broker/api/queue writes its wire form).
type Message struct {
	ID            uuid.UUID
	TransactionID string
	TraceID       string // "" for none
	Traceparent   string // W3C trace context of the push; "" for none
	Data          []byte // raw JSON
	ProducerSub   string // "" for none
	CreatedAt     int64  // µs since the epoch
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
		p.line(s.hot.Wait(uuid.Nil, p.Group, uuid.Nil))
		return Popped{Wake: p.waiter.C()}, nil
	}
	if err != nil {
		return Popped{}, err
	}
	// The pop gets in line before it looks, so that a mark that lands while
	// this attempt runs still wakes the wait that follows it.
	var idle Popped

	var leaseID uuid.UUID // none: auto-ack
	if !p.AutoAck {
		leaseID = ids.New()
	}
	var claims []db.PopClaim
	if p.Partition != "" {
		created := s.hot.Watch(q.ID) // by the push that creates the partition
		part, err := s.catalog.LookupPartition(ctx, p.Tenant, p.Queue, p.Partition)
		if errors.Is(err, catalog.ErrNotFound) {
			p.line(nil)
			return Popped{Wake: created}, nil
		}
		if err != nil {
			return Popped{}, err
		}
		p.line(s.hot.Wait(q.ID, p.Group, part.ID))
		idle.Wake = p.waiter.C()
		var looks []db.PopLook
		claims, looks, err = s.claim(context.WithoutCancel(ctx), p, q, []uuid.UUID{part.ID}, leaseID)
		if err != nil {
			return Popped{}, err
		}
		for _, o := range looks {
			idle.Due = deferredUntil(idle.Due, o)
		}
	} else {
		woken := p.line(s.hot.Wait(q.ID, p.Group, uuid.Nil))
		idle.Wake = p.waiter.C()
		claims, err = s.claimHot(ctx, p, q, leaseID, &idle, woken)
		if err != nil {
			return Popped{}, err
		}
	}
	if len(claims) == 0 {
		return idle, nil
	}
	if ctx.Err() != nil && !p.AutoAck {
		s.release(context.WithoutCancel(ctx), leaseID)
		return Popped{}, ctx.Err()
	}
	msgs, claims, err := s.deliver(ctx, q, p, claims, leaseID)
	if err != nil {
		return Popped{}, err
	}
	return Popped{Messages: msgs, Claims: claims, LeaseID: leaseID, Wake: idle.Wake, Due: idle.Due}, nil
}

// Claimed delivers the batch that a cycle claimed for group under leaseID
// (db.CycleResult.Next) as a pop delivers its own: its messages, and the
// claim, nil when it delivered nothing (every frame of it was deleted, and
// the batch was consumed and its lease released).
func (s *Store) Claimed(ctx context.Context, tenant, queue, group string, claim *db.PopClaim, leaseID uuid.UUID) ([]Message, *db.PopClaim, error) {
	q, err := s.catalog.LookupQueue(ctx, tenant, queue)
	if err != nil {
		return nil, nil, err
	}
	msgs, claims, err := s.deliver(ctx, q, &PopRequest{Tenant: tenant, Queue: q.Name, Group: group}, []db.PopClaim{*claim}, leaseID)
	if err != nil || len(claims) == 0 {
		return nil, nil, err
	}
	return msgs, &claims[0], nil
}

// MaxPopBytes is the cap on the stored bytes of one pop's answer, which
// a cycle's next batch keeps to as well.
func (s *Store) MaxPopBytes() int64 { return s.maxPopBytes }

// deliver turns claims into the messages of a pop's answer, ends the
// batches whose last frames were deleted, and counts what it delivers. A
// leased batch whose messages cannot be delivered is released.
func (s *Store) deliver(ctx context.Context, q *catalog.Queue, p *PopRequest, claims []db.PopClaim, leaseID uuid.UUID) ([]Message, []db.PopClaim, error) {
	msgs, ends, err := s.decode(q, claims, p, leaseID)
	if err == nil {
		claims, err = s.trimDeleted(context.WithoutCancel(ctx), p, q, leaseID, claims, ends)
	}
	if err != nil {
		if !p.AutoAck {
			s.release(context.WithoutCancel(ctx), leaseID)
		}
		return nil, nil, err
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
	return msgs, claims, nil
}

// Bounds on the search of a final pop (PopRequest.Final) that found
// nothing in the candidates of its first look: each further round tries up
// to sweepCandidates of them at once, and there are at most sweepRounds, so
// that a hot list whose entries are marked again as fast as they are found
// empty cannot hold the pop forever.
const (
	sweepCandidates = 256
	sweepRounds     = 64
)

// A claim that finds the database unreachable, on Citus the node of its
// first candidate or of one it came to, gives up its first candidate for
// unreachableWait and tries again with the others, up to unreachableTries
// claims in a pop, so that while a node is down the partitions of the
// others are served (the node test: 7 of 24 pops over a queue served
// without it, 22 with 4 tries, 24 with 8); past them the pop answers 503.
// On one PostgreSQL every try fails alike, and at once.
const (
	unreachableTries = 8
	unreachableWait  = time.Second
)

// claimHot claims from the candidates of the hot list and settles each one
// queen.pop_v2 looked at. The hot list keeps a partition that was drained (by
// an auto-ack pop, or through the partition route, which settles nothing)
// as a candidate until a pop finds it empty, so the first candidates may
// all be empty while other partitions hold messages. A long-poll looks
// further through the hot list while its candidates were all empty, and
// parks once one was leased, deferred or locked, or none is left; a final
// pop looks further, at the price of one more round trip only on the way
// to an empty answer: first through the rest of the hot list, then, once
// it is exhausted, in the database, which the announcements of another
// replica may not have reached yet. The partition
// whose mark woke the pop (uuid.Nil: none) is tried first.
func (s *Store) claimHot(ctx context.Context, p *PopRequest, q *catalog.Queue, leaseID uuid.UUID, idle *Popped, woken uuid.UUID) ([]db.PopClaim, error) {
	n, reseeded, unreachable := p.Partitions+extraCandidates, false, 0
	if !s.hot.Seeded(q.ID, p.Group) {
		if _, err := s.seed(ctx, q.ID, p.Group); err != nil {
			return nil, err
		}
		reseeded = true
	}
	for range sweepRounds {
		cands, due := s.hot.Candidates(q.ID, p.Group, n, time.Now(), woken)
		woken = uuid.Nil
		idle.Due = earliest(idle.Due, due)
		if len(cands) == 0 {
			if !p.Final || reseeded {
				return nil, nil
			}
			added, err := s.seed(ctx, q.ID, p.Group)
			if err != nil || !added {
				return nil, err
			}
			reseeded = true
			continue
		}
		parts := make([]uuid.UUID, len(cands))
		for i, c := range cands {
			parts[i] = c.ID
		}
		claims, looks, err := s.claim(context.WithoutCancel(ctx), p, q, parts, leaseID)
		if err != nil {
			if unreachable++; !db.Unavailable(err) || unreachable == unreachableTries {
				return nil, err
			}
			s.hot.Settle(q.ID, p.Group, cands[0], hotlist.Busy, time.Now().Add(unreachableWait))
			continue
		}
		if len(claims) > 0 { // it had what it wanted before it came to the rest
			s.hot.Return(q.ID, p.Group, cands[len(looks):])
		}
		settled := false // a candidate left the next round's
		drained := len(looks) == len(cands)
		for i, o := range looks {
			s.hot.Settle(q.ID, p.Group, cands[i], o.Outcome, o.RetryAt)
			idle.Due = deferredUntil(idle.Due, o)
			settled = settled || o.Outcome == hotlist.Empty || !o.RetryAt.IsZero()
			drained = drained && o.Outcome == hotlist.Empty
		}
		// Without a claim, fewer looks than candidates means queen.pop_v2
		// looked at none (a suspended streaming query, a deleted queue),
		// and nothing settled means every candidate was locked by another
		// pop or ack: the next round would find the same. A long-poll
		// whose candidates were all drained looks further too: the marks
		// of the partitions behind them may have come before it was in
		// line, and would wake it no more.
		if len(claims) > 0 || !p.Final && !drained || len(looks) < len(cands) || !settled {
			return claims, nil
		}
		n = sweepCandidates
	}
	return nil, nil
}

// deferredUntil returns when a long-poll must look again, given what a
// claim found: a deferred partition (a lease, a retryDelay,
// delayedProcessing or windowBuffer) wakes it when it is due, since no
// push may come to wake it.
func deferredUntil(due time.Time, o db.PopLook) time.Time {
	if o.Outcome != hotlist.Busy {
		return due
	}
	return earliest(due, o.RetryAt)
}

// earliest returns the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// claim calls queen.pop_v2 and returns the claimed partitions with their
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
	var frames []segment.Frame
	for k, c := range claims {
		ends[k] = c.BatchStart
		for j := range c.Segments {
			sg := &c.Segments[j]
			frames, err = segment.DecodeInto(frames, sg.Body, uint64(sg.Checksum), sg.Count)
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
				msgs = append(msgs, Message{
					ID: f.ID, TransactionID: f.TransactionID, TraceID: f.TraceID, Traceparent: f.Traceparent, Data: payload,
					ProducerSub: f.ProducerSub, CreatedAt: f.CreatedAt, PartitionID: c.ID, Partition: c.Name,
					LeaseID: lease, ConsumerGroup: p.Group,
				})
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
