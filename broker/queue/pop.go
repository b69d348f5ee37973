package queue

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/auth"
	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/broker/httpx"
	"github.com/regent-mq/regent/broker/log"
	"github.com/regent-mq/regent/broker/pg"
	"github.com/regent-mq/regent/broker/segment"
)

// Bounds on pop parameters: beyond them one request would hold a
// connection, or build an answer, out of proportion.
const (
	maxBatch      = 10000
	maxPartitions = 100
	maxTimeout    = 10 * time.Minute
	// extraCandidates are tried beyond the partitions wanted, in the same
	// call, in case competing consumers took the first ones.
	extraCandidates = 4
)

// popRequest is a parsed pop.
type popRequest struct {
	tenant     string
	queue      string
	partition  string // "" on the queue-wide route
	group      string
	batch      int
	partitions int
	wait       bool
	timeout    time.Duration
	autoAck    bool
	subStart   string // 'all', 'now' or an RFC 3339 time
}

func parsePop(r *http.Request) (*popRequest, error) {
	q := r.URL.Query()
	p := &popRequest{
		tenant:    auth.FromContext(r.Context()).Tenant,
		queue:     r.PathValue("queue"),
		partition: r.PathValue("partition"),
		group:     q.Get("consumerGroup"),
		subStart:  "all",
	}
	if p.group == "" {
		p.group = QueueMode
	}
	if err := httpx.CheckTexts("queue", p.queue, "partition", p.partition, "consumerGroup", p.group); err != nil {
		return nil, err
	}
	var err error
	if p.batch, err = intParam(q.Get("batch"), "batch", 1, 1, maxBatch); err != nil {
		return nil, err
	}
	if p.partitions, err = intParam(q.Get("partitions"), "partitions", 1, 1, maxPartitions); err != nil {
		return nil, err
	}
	ms, err := intParam(q.Get("timeout"), "timeout", 30000, 0, int(maxTimeout/time.Millisecond))
	if err != nil {
		return nil, err
	}
	p.timeout = time.Duration(ms) * time.Millisecond
	if p.wait, err = boolParam(q.Get("wait"), "wait"); err != nil {
		return nil, err
	}
	if p.autoAck, err = boolParam(q.Get("autoAck"), "autoAck"); err != nil {
		return nil, err
	}
	// Queen recognises only "new" (Regent also its documented alias
	// "new-only"); every other mode means all, and an unparsable
	// subscriptionFrom is ignored and means all, even with mode new
	// (queue-admin-api.md §9). Neither is ever a 400.
	if m := q.Get("subscriptionMode"); m == "new" || m == "new-only" {
		p.subStart = "now"
	}
	switch from := q.Get("subscriptionFrom"); from {
	case "":
	case "now":
		p.subStart = "now"
	default:
		p.subStart = "all"
		// A time PostgreSQL cannot hold (it has no year 0) is as
		// unparsable as any other.
		if t, err := time.Parse(time.RFC3339Nano, from); err == nil && t.UTC().Year() >= 1 {
			p.subStart = t.UTC().Format(time.RFC3339Nano)
		}
	}
	return p, nil
}

func intParam(v, name string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, httpx.BadRequest("%s must be an integer from %d to %d, not %q", name, lo, hi, v)
	}
	return n, nil
}

func boolParam(v, name string) (bool, error) {
	switch v {
	case "true", "1":
		return true, nil
	case "", "false", "0":
		return false, nil
	}
	return false, httpx.BadRequest("%s must be true, 1, false or 0, not %q", name, v)
}

// message is a delivered message (see writePop for its wire form).
type message struct {
	ID            uuid.UUID
	TransactionID string
	TraceID       *string
	Data          []byte // raw JSON
	ProducerSub   *string
	CreatedAt     int64 // µs since the epoch; written in TimeFormat
	PartitionID   uuid.UUID
	Partition     string
	LeaseID       string
	ConsumerGroup string
}

// rawJSON is a payload that the broker stored after validating it as JSON;
// it is written as is, without encoding/json compacting it again.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// TimeFormat is the wire format of timestamps: RFC 3339, UTC, microseconds.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// claim is one partition a pop claimed.
type claim struct {
	id         uuid.UUID
	name       string
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

// handlePop is GET /api/v1/pop/queue/{queue}[/partition/{partition}].
func (s *Store) handlePop(w http.ResponseWriter, r *http.Request) {
	p, err := parsePop(r)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	if err := s.log.Quotas().AdmitPop(p.tenant); err != nil {
		httpx.Fail(w, err)
		return
	}
	ctx := r.Context()
	var deadline time.Time
	if p.wait {
		deadline = time.Now().Add(p.timeout)
	}
	if !s.holdWhilePaused(ctx, deadline) {
		if ctx.Err() == nil {
			w.WriteHeader(http.StatusNoContent)
		}
		return
	}
	for {
		if ctx.Err() != nil {
			return // the client went away: claim nothing
		}
		msgs, claims, leaseID, wake, due, err := s.popOnce(ctx, p)
		if err != nil {
			s.fail(w, r, "pop", err)
			return
		}
		if len(msgs) > 0 {
			lease := ""
			if !p.autoAck {
				lease = leaseID.String()
			}
			s.writePop(w, p, msgs, claims, lease)
			return
		}
		now := time.Now()
		if !p.wait || !now.Before(deadline) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		until := deadline
		if !due.IsZero() && due.Before(until) {
			until = due
		}
		timer := time.NewTimer(until.Sub(now))
		s.metrics.PopsParked.Inc()
		select {
		case <-ctx.Done():
		case <-wake:
		case <-timer.C:
		}
		s.metrics.PopsParked.Dec()
		timer.Stop()
	}
}

// pausePoll is how often a long-poll held by pop maintenance looks at the
// switch, which reaches every replica within a second anyway.
const pausePoll = 100 * time.Millisecond

// holdWhilePaused keeps a pop from delivering while pop maintenance is on:
// without a deadline (no wait) it reports false at once; a long-poll is
// held until the switch goes off (true: pop as usual) or its deadline
// passes (false), so that a client sees an idle queue, not a poll storm.
func (s *Store) holdWhilePaused(ctx context.Context, deadline time.Time) bool {
	for s.settings.PopPaused() {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		t := time.NewTimer(min(left, pausePoll))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return true
}

// popOnce makes one attempt. With nothing to deliver it returns the channel
// that the next mark of the queue closes, and when a deferred partition
// becomes due.
func (s *Store) popOnce(ctx context.Context, p *popRequest) (msgs []message, claims []claim, leaseID uuid.UUID, wake <-chan struct{}, due time.Time, err error) {
	q, err := s.log.LookupQueue(ctx, p.tenant, p.queue)
	if errors.Is(err, log.ErrNotFound) {
		return nil, nil, uuid.Nil, s.hot.Wait(uuid.Nil), time.Time{}, nil
	}
	if err != nil {
		return nil, nil, uuid.Nil, nil, time.Time{}, err
	}
	// Taken before looking, so that a mark that lands while this attempt
	// runs still wakes the wait that follows it.
	wake = s.hot.Wait(q.ID)

	var cands []hotlist.Candidate
	var ids []uuid.UUID
	if p.partition != "" {
		part, err := s.log.LookupPartition(ctx, p.tenant, p.queue, p.partition)
		if errors.Is(err, log.ErrNotFound) {
			return nil, nil, uuid.Nil, wake, time.Time{}, nil
		}
		if err != nil {
			return nil, nil, uuid.Nil, nil, time.Time{}, err
		}
		ids = []uuid.UUID{part.ID}
	} else {
		if !s.hot.Seeded(q.ID, p.group) {
			if err := s.seed(ctx, q.ID, p.group); err != nil {
				return nil, nil, uuid.Nil, nil, time.Time{}, err
			}
		}
		cands, due = s.hot.Candidates(q.ID, p.group, p.partitions+extraCandidates, time.Now())
		if len(cands) == 0 {
			return nil, nil, uuid.Nil, wake, due, nil
		}
		ids = make([]uuid.UUID, len(cands))
		for i, c := range cands {
			ids[i] = c.ID
		}
	}

	var lease pgtype.UUID
	if !p.autoAck {
		leaseID = pg.NewID()
		lease = pgtype.UUID{Bytes: leaseID, Valid: true}
	}
	// The claim runs to its end even if the client leaves meanwhile: a
	// claim cut short would leave its outcome unknown. A claim whose client
	// left is released below.
	claims, outcomes, err := s.claim(context.WithoutCancel(ctx), p, q, ids, lease)
	if err != nil {
		return nil, nil, uuid.Nil, nil, time.Time{}, err
	}
	if cands != nil {
		for i, o := range outcomes {
			s.hot.Settle(q.ID, p.group, cands[i], o.outcome, o.retryAt)
		}
	}
	if len(claims) == 0 {
		return nil, nil, uuid.Nil, wake, due, nil
	}
	if ctx.Err() != nil && !p.autoAck {
		s.release(context.WithoutCancel(ctx), leaseID)
		return nil, nil, uuid.Nil, nil, time.Time{}, ctx.Err()
	}
	msgs, err = s.decode(q, claims, p, leaseID)
	if err != nil {
		if !p.autoAck {
			s.release(context.WithoutCancel(ctx), leaseID)
		}
		return nil, nil, uuid.Nil, nil, time.Time{}, err
	}
	s.metrics.Popped.WithLabelValues(q.Tenant, q.Name).Add(float64(len(msgs)))
	s.log.Quotas().Popped(q.Tenant, len(msgs))
	return msgs, claims, leaseID, wake, due, nil
}

type candidateOutcome struct {
	outcome hotlist.Outcome
	retryAt time.Time
}

// claim calls queen.pop and returns the claimed partitions with their
// segments, and the outcome of each candidate it looked at, in order.
func (s *Store) claim(ctx context.Context, p *popRequest, q *log.Queue, ids []uuid.UUID, lease pgtype.UUID) ([]claim, []candidateOutcome, error) {
	rows, err := s.pool.Query(ctx, `SELECT partition_id, partition_name, outcome, retry_at, batch_start, batch_end,
			base_offset, frame_count, body, checksum
		FROM queen.pop(p_tenant => $1, p_queue_id => $2, p_candidates => $3, p_group => $4,
			p_partitions => $5, p_batch => $6, p_lease_id => $7, p_sub_start => $8, p_max_bytes => $9)`,
		p.tenant, pg.ID(q.ID), pg.IDs(ids), p.group, p.partitions, p.batch, lease, p.subStart, s.settings.MaxPopBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pop %q: %w", p.queue, err)
	}
	defer rows.Close()
	var claims []claim
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
			return nil, nil, fmt.Errorf("pop %q: %w", p.queue, err)
		}
		switch outcome {
		case "segment":
			segs = append(segs, popSegment{base: base.Int64, count: int(count.Int32), body: body, checksum: sum.Int64})
			continue
		case "claimed":
			claims = append(claims, claim{id: pid, name: name.String, batchStart: start.Int64, batchEnd: end.Int64, segments: segs})
			segs = nil
			outcomes = append(outcomes, candidateOutcome{hotlist.Claimed, retryAt.Time})
		case "busy":
			// A claim that failed after its segments were read voids them.
			segs = nil
			outcomes = append(outcomes, candidateOutcome{hotlist.Busy, retryAt.Time})
		case "empty":
			outcomes = append(outcomes, candidateOutcome{hotlist.Empty, time.Time{}})
		case "gone":
			s.log.Invalidate(p.tenant, p.queue)
			s.hot.Forget(q.ID)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("pop %q: %w", p.queue, err)
	}
	return claims, outcomes, nil
}

// decode turns the claimed segments into messages: only the frames inside
// each batch, payloads opened when sealed.
func (s *Store) decode(q *log.Queue, claims []claim, p *popRequest, leaseID uuid.UUID) ([]message, error) {
	lease := ""
	if !p.autoAck {
		lease = leaseID.String()
	}
	n := 0
	for _, c := range claims {
		n += int(c.batchEnd - c.batchStart)
	}
	msgs := make([]message, 0, n)
	for _, c := range claims {
		for j := range c.segments {
			sg := &c.segments[j]
			frames, err := segment.Decode(sg.body, uint64(sg.checksum), sg.count)
			if err != nil {
				return nil, fmt.Errorf("queue %q partition %s segment %d: %w", q.Name, c.id, sg.base, err)
			}
			// The frames hold their own copy: the stored body can go now,
			// not with the answer.
			sg.body = nil
			for i := range frames {
				off := sg.base + int64(i)
				if off < c.batchStart || off >= c.batchEnd {
					continue
				}
				f := &frames[i]
				payload, err := s.open(f)
				if err != nil {
					return nil, fmt.Errorf("queue %q partition %s offset %d: %w", q.Name, c.id, off, err)
				}
				m := message{
					ID: f.ID, TransactionID: f.TransactionID, Data: payload,
					CreatedAt: f.CreatedAt, PartitionID: c.id, Partition: c.name,
					LeaseID: lease, ConsumerGroup: p.group,
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
	return msgs, nil
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
	rows, _ := s.pool.Query(ctx, `UPDATE queen.cursors c SET lease_id = NULL, lease_expires_at = NULL
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
