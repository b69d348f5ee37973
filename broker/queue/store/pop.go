package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/counters"
	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/broker/log"
	"github.com/regent-mq/regent/broker/pg"
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
	Claims   []Claim
	LeaseID  uuid.UUID
	Wake     <-chan struct{}
	Due      time.Time
}

// Message is a delivered message (broker/queue writes its wire form).
type Message struct {
	ID            uuid.UUID
	TransactionID string
	TraceID       *string
	Data          []byte // raw JSON
	ProducerSub   *string
	CreatedAt     int64 // µs since the epoch
	PartitionID   uuid.UUID
	Partition     string
	LeaseID       string
	ConsumerGroup string
}

// Claim is one partition a pop claimed.
type Claim struct {
	ID         uuid.UUID
	Name       string
	batchStart int64
	batchEnd   int64
	segments   []popSegment
}

type popSegment struct {
	base     int64
	count    int
	body     []byte
	checksum int64
}

// Pop makes one attempt at p. The claim runs to its end even if the client
// leaves meanwhile, since a claim cut short would leave its outcome
// unknown; a claim whose client left is released.
func (s *Store) Pop(ctx context.Context, p *PopRequest) (Popped, error) {
	q, err := s.log.LookupQueue(ctx, p.Tenant, p.Queue)
	if errors.Is(err, log.ErrNotFound) {
		return Popped{Wake: s.hot.Wait(uuid.Nil)}, nil
	}
	if err != nil {
		return Popped{}, err
	}
	// Taken before looking, so that a mark that lands while this attempt
	// runs still wakes the wait that follows it.
	idle := Popped{Wake: s.hot.Wait(q.ID)}

	var cands []hotlist.Candidate
	var ids []uuid.UUID
	if p.Partition != "" {
		part, err := s.log.LookupPartition(ctx, p.Tenant, p.Queue, p.Partition)
		if errors.Is(err, log.ErrNotFound) {
			return idle, nil
		}
		if err != nil {
			return Popped{}, err
		}
		ids = []uuid.UUID{part.ID}
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
		ids = make([]uuid.UUID, len(cands))
		for i, c := range cands {
			ids[i] = c.ID
		}
	}

	var leaseID uuid.UUID
	var lease pgtype.UUID
	if !p.AutoAck {
		leaseID = pg.NewID()
		lease = pgtype.UUID{Bytes: leaseID, Valid: true}
	}
	claims, outcomes, err := s.claim(context.WithoutCancel(ctx), p, q, ids, lease)
	if err != nil {
		return Popped{}, err
	}
	for i, o := range outcomes {
		if cands != nil {
			s.hot.Settle(q.ID, p.Group, cands[i], o.outcome, o.retryAt)
		}
		// A deferred partition (a lease, a retryDelay, delayedProcessing or
		// windowBuffer) wakes a long-poll when it is due, since no push may
		// come to wake it.
		if o.outcome == hotlist.Busy && !o.retryAt.IsZero() && (idle.Due.IsZero() || o.retryAt.Before(idle.Due)) {
			idle.Due = o.retryAt
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
	s.log.Quotas().Popped(q.Tenant, len(msgs))
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

type candidateOutcome struct {
	outcome hotlist.Outcome
	retryAt time.Time
}

// claim calls queen.pop and returns the claimed partitions with their
// segments, and the outcome of each candidate it looked at, in order.
func (s *Store) claim(ctx context.Context, p *PopRequest, q *log.Queue, ids []uuid.UUID, lease pgtype.UUID) ([]Claim, []candidateOutcome, error) {
	rows, err := s.pool.Query(ctx, `SELECT partition_id, partition_name, outcome, retry_at, batch_start, batch_end,
			base_offset, frame_count, body, checksum
		FROM queen.pop(p_tenant => $1, p_queue_id => $2, p_candidates => $3, p_group => $4,
			p_partitions => $5, p_batch => $6, p_lease_id => $7, p_sub_start => $8, p_max_bytes => $9)`,
		p.Tenant, pg.ID(q.ID), pg.IDs(ids), p.Group, p.Partitions, p.Batch, lease, p.SubStart, s.maxPopBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pop %q: %w", p.Queue, err)
	}
	defer rows.Close()
	var claims []Claim
	var outcomes []candidateOutcome
	var segs []popSegment
	for rows.Next() {
		var (
			pid                   uuid.UUID
			name                  pgtype.Text
			outcome               string
			retryAt               pgtype.Timestamptz
			start, end, base, sum pgtype.Int8
			count                 pgtype.Int4
			body                  []byte
		)
		if err := rows.Scan(&pid, &name, &outcome, &retryAt, &start, &end, &base, &count, &body, &sum); err != nil {
			return nil, nil, fmt.Errorf("pop %q: %w", p.Queue, err)
		}
		switch outcome {
		case "segment":
			segs = append(segs, popSegment{base: base.Int64, count: int(count.Int32), body: body, checksum: sum.Int64})
			continue
		case "claimed":
			claims = append(claims, Claim{ID: pid, Name: name.String, batchStart: start.Int64, batchEnd: end.Int64, segments: segs})
			segs = nil
			outcomes = append(outcomes, candidateOutcome{hotlist.Claimed, retryAt.Time})
		case "busy":
			// A claim that failed after its segments were read voids them.
			segs = nil
			outcomes = append(outcomes, candidateOutcome{hotlist.Busy, retryAt.Time})
		case "empty":
			outcomes = append(outcomes, candidateOutcome{hotlist.Empty, time.Time{}})
		case "gone":
			s.log.Invalidate(p.Tenant, p.Queue)
			s.hot.Forget(q.ID)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("pop %q: %w", p.Queue, err)
	}
	return claims, outcomes, nil
}

// decode turns the claimed segments into messages: only the frames inside
// each batch, payloads opened when sealed, and never a frame that DELETE
// /api/v1/messages marked deleted. ends are where each claim's delivered
// messages end: its batch start when it delivered none.
func (s *Store) decode(q *log.Queue, claims []Claim, p *PopRequest, leaseID uuid.UUID) (msgs []Message, ends []int64, err error) {
	lease := ""
	if !p.AutoAck {
		lease = leaseID.String()
	}
	n := 0
	for _, c := range claims {
		n += int(c.batchEnd - c.batchStart)
	}
	msgs = make([]Message, 0, n)
	ends = make([]int64, len(claims))
	for k, c := range claims {
		ends[k] = c.batchStart
		for j := range c.segments {
			sg := &c.segments[j]
			frames, err := segment.Decode(sg.body, uint64(sg.checksum), sg.count)
			if err != nil {
				return nil, nil, fmt.Errorf("queue %q partition %s segment %d: %w", q.Name, c.ID, sg.base, err)
			}
			// The frames hold their own copy: the stored body can go now,
			// not with the answer.
			sg.body = nil
			for i := range frames {
				off := sg.base + int64(i)
				f := &frames[i]
				if off < c.batchStart || off >= c.batchEnd || f.Deleted() {
					continue
				}
				ends[k] = off + 1
				payload, err := s.open(f)
				if err != nil {
					return nil, nil, fmt.Errorf("queue %q partition %s offset %d: %w", q.Name, c.ID, off, err)
				}
				m := Message{
					ID: f.ID, TransactionID: f.TransactionID, Data: payload,
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
func (s *Store) trimDeleted(ctx context.Context, p *PopRequest, q *log.Queue, leaseID uuid.UUID, claims []Claim, ends []int64) ([]Claim, error) {
	var ids []uuid.UUID
	var at []int64
	kept := claims[:0:0]
	for i, c := range claims {
		if ends[i] < c.batchEnd {
			ids, at = append(ids, c.ID), append(at, ends[i])
		}
		if ends[i] > c.batchStart {
			kept = append(kept, c)
		}
	}
	if len(ids) == 0 || p.AutoAck {
		return kept, nil
	}
	rows, err := s.pool.Query(ctx, `UPDATE queen.cursors c
		   SET batch_end = CASE WHEN t.e > c.batch_start THEN t.e ELSE c.batch_end END,
		       committed = CASE WHEN t.e > c.batch_start THEN c.committed ELSE c.batch_end END,
		       (lease_id, lease_expires_at) = (SELECT r.lease_id, r.lease_expires_at
		                                         FROM queen.lease_release(c, t.e > c.batch_start IS NOT TRUE, false) r)
		  FROM unnest($2::uuid[], $3::bigint[]) AS t (pid, e)
		 WHERE c.partition_id = t.pid AND c.consumer_group = $1 AND c.lease_id = $4
		RETURNING c.partition_id, c.lease_id IS NULL`, p.Group, pg.IDs(ids), at, leaseID)
	released, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Partition uuid.UUID
		Released  bool
	}])
	if err != nil {
		return nil, fmt.Errorf("queue %q: end batches at their deleted messages: %w", q.Name, err)
	}
	for _, r := range released {
		if r.Released {
			s.log.Announce(q.ID, r.Partition)
		}
	}
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
	rows, _ := s.pool.Query(ctx, `UPDATE queen.cursors c
		   SET (lease_id, lease_expires_at) = (SELECT r.lease_id, r.lease_expires_at
		                                         FROM queen.lease_release(c, true, false) r)
		  FROM queen.partitions p
		 WHERE c.lease_id = $1 AND p.id = c.partition_id
		RETURNING p.queue_id, p.id`, leaseID)
	released, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Queue, Partition uuid.UUID }])
	if err != nil {
		s.logger.Error("release the lease of an abandoned pop", "lease_id", leaseID, "err", err)
		return
	}
	// The statement has committed once its rows are read.
	for _, r := range released {
		s.log.Announce(r.Queue, r.Partition)
	}
}
