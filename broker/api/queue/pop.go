package queue

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/domain/queuestore"
	"github.com/regent-mq/regent/broker/tracing"
)

// Bounds on pop parameters: beyond them one request would hold a
// connection, or build an answer, out of proportion. MaxBatch bounds a
// cycle's next_batch too (broker/api/streams).
const (
	MaxBatch      = 10000
	maxPartitions = 100
	maxTimeout    = 10 * time.Minute
)

// popRequest is a parsed pop: what the store pops, and how long to wait.
type popRequest struct {
	queuestore.PopRequest
	wait    bool
	timeout time.Duration
}

func parsePop(r *http.Request, defaultMode string) (*popRequest, error) {
	q := r.URL.Query()
	p := &popRequest{PopRequest: queuestore.PopRequest{
		Tenant:    auth.FromContext(r.Context()).Tenant,
		Queue:     r.PathValue("queue"),
		Partition: r.PathValue("partition"),
		Group:     q.Get("consumerGroup"),
		SubStart:  "all",
	}}
	if p.Group == "" {
		p.Group = catalog.QueueMode
	}
	if err := httpx.CheckTexts("queue", p.Queue, "partition", p.Partition, "consumerGroup", p.Group); err != nil {
		return nil, err
	}
	var err error
	if p.Batch, err = intParam(q.Get("batch"), "batch", 1, 1, MaxBatch); err != nil {
		return nil, err
	}
	if p.Partitions, err = intParam(q.Get("partitions"), "partitions", 1, 1, maxPartitions); err != nil {
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
	p.Final = !p.wait
	if p.AutoAck, err = boolParam(q.Get("autoAck"), "autoAck"); err != nil {
		return nil, err
	}
	// Queen recognises only "new" (Regent also its documented alias
	// "new-only"); every other mode means all, and an unparsable
	// subscriptionFrom is ignored and means all, even with mode new
	// (queue-admin-api.md §9). Neither is ever a 400.
	m := defaultMode
	if q.Has("subscriptionMode") {
		m = q.Get("subscriptionMode")
	}
	if m == "new" || m == "new-only" {
		p.SubStart = "now"
	}
	switch from := q.Get("subscriptionFrom"); from {
	case "":
	case "now":
		p.SubStart = "now"
	default:
		p.SubStart = "all"
		// A time PostgreSQL cannot hold (it has no year 0) is as
		// unparsable as any other.
		if t, err := time.Parse(time.RFC3339Nano, from); err == nil && t.UTC().Year() >= 1 {
			p.SubStart = t.UTC().Format(time.RFC3339Nano)
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

// rawJSON is a payload that the broker stored after validating it as JSON;
// it is written as is, without encoding/json compacting it again.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// handlePop is GET /api/v1/pop/queue/{queue}[/partition/{partition}].
func (s *Handler) handlePop(w http.ResponseWriter, r *http.Request) {
	p, err := parsePop(r, s.DefaultMode)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	if err := s.Quotas.AdmitPop(p.Tenant); err != nil {
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
			s.Metrics.Ops.Add(p.Tenant, p.Queue, counters.PopEmpty, 1)
			w.WriteHeader(http.StatusNoContent)
		}
		return
	}
	defer p.Leave()
	for {
		if ctx.Err() != nil {
			return // the client went away: claim nothing
		}
		got, err := s.Store.Pop(ctx, &p.PopRequest)
		if err != nil {
			s.fail(w, r, "pop", err)
			return
		}
		if len(got.Messages) > 0 {
			if tracing.Enabled() {
				for i := range got.Messages {
					tracing.Link(ctx, got.Messages[i].Traceparent)
				}
			}
			lease := ""
			if !p.AutoAck {
				lease = got.LeaseID.String()
			}
			writePop(w, p.Queue, p.Group, got.Messages, got.Claims, lease)
			return
		}
		now := time.Now()
		if !p.wait || !now.Before(deadline) {
			s.Metrics.Ops.Add(p.Tenant, p.Queue, counters.PopEmpty, 1)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		until := deadline
		if !got.Due.IsZero() && got.Due.Before(until) {
			until = got.Due
		}
		timer := time.NewTimer(until.Sub(now))
		s.Metrics.PopsParked.Inc()
		s.Metrics.Ops.Park(p.Tenant, p.Queue, 1)
		select {
		case <-ctx.Done():
		case <-httpx.Draining(ctx):
			// The broker is stopping: one last look, then an answer.
			deadline = time.Now()
		case <-got.Wake:
		case <-timer.C:
		}
		s.Metrics.PopsParked.Dec()
		s.Metrics.Ops.Park(p.Tenant, p.Queue, -1)
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
func (s *Handler) holdWhilePaused(ctx context.Context, deadline time.Time) bool {
	for s.PopPaused() {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		t := time.NewTimer(min(left, pausePoll))
		select {
		case <-ctx.Done():
		case <-httpx.Draining(ctx):
			t.Stop()
			return false
		case <-t.C:
		}
		t.Stop()
	}
	return true
}
