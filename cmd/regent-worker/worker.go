package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// worker runs cfg.workers pop-fold-commit loops for one query.
type worker struct {
	cfg     config
	c       *client
	log     *slog.Logger
	queryID string
	group   string

	mu         sync.Mutex
	partitions map[string]*partition // by id: every partition seen

	// quietSince is when pops started finding nothing (unix nanoseconds;
	// 0 while they find data). Only one loop flushes at a time.
	quietSince atomic.Int64
	flushing   sync.Mutex
}

// partition is a source partition seen in a pop. Its mutex keeps this
// worker's batch folds and flushes on it one at a time.
type partition struct {
	mu   sync.Mutex
	id   string
	name string
}

type popAnswer struct {
	PartitionID string `json:"partitionId"`
	Partition   string `json:"partition"`
	LeaseID     string `json:"leaseId"`
	Messages    []struct {
		TransactionID string          `json:"transactionId"`
		Data          json.RawMessage `json:"data"`
	} `json:"messages"`
}

type cycleAnswer struct {
	Success     bool   `json:"success"`
	Error       string `json:"error"`
	PushResults []struct {
		Status string `json:"status"`
	} `json:"push_results"`
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	w := &worker{cfg: cfg, c: newClient(cfg.broker, cfg.token, log), log: log,
		group: "streams." + cfg.query, partitions: map[string]*partition{}}
	if err := w.register(ctx); err != nil {
		return err
	}
	log.Info("query registered", "query", cfg.query, "query_id", w.queryID, "source", cfg.source, "sink", cfg.sink)
	errs := make(chan error, cfg.workers)
	for range cfg.workers {
		go func() { errs <- w.loop(ctx) }()
	}
	var first error
	for range cfg.workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (w *worker) register(ctx context.Context) error {
	var out struct {
		QueryID string `json:"query_id"`
		Error   string `json:"error"`
	}
	status, err := w.c.call(ctx, "POST", "/streams/v1/queries", map[string]any{
		"name": w.cfg.query, "source_queue": w.cfg.source, "sink_queue": w.cfg.sink, "config_hash": configHash,
	}, &out)
	switch {
	case err != nil:
		return fmt.Errorf("register: %w", err)
	case status != http.StatusOK:
		return fmt.Errorf("register: %d %s", status, out.Error)
	}
	w.queryID = out.QueryID
	return nil
}

func (w *worker) loop(ctx context.Context) error {
	for ctx.Err() == nil {
		b, err := w.pop(ctx)
		if err != nil {
			return err
		}
		if b == nil {
			now := time.Now().UnixNano()
			w.quietSince.CompareAndSwap(0, now)
			if err := w.flushIfIdle(ctx); err != nil {
				return err
			}
			continue
		}
		w.quietSince.Store(0)
		if err := w.process(ctx, b); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (w *worker) pop(ctx context.Context) (*popAnswer, error) {
	q := url.Values{
		"batch":         {strconv.Itoa(w.cfg.batch)},
		"wait":          {"true"},
		"timeout":       {strconv.FormatInt(w.cfg.waitTimeout.Milliseconds(), 10)},
		"consumerGroup": {w.group},
	}
	var b popAnswer
	status, err := w.c.call(ctx, "GET", "/api/v1/pop/queue/"+url.PathEscape(w.cfg.source)+"?"+q.Encode(), nil, &b)
	switch {
	case err != nil:
		return nil, fmt.Errorf("pop: %w", err)
	case status == http.StatusNoContent:
		return nil, nil
	case status != http.StatusOK:
		return nil, fmt.Errorf("pop: status %d", status)
	}
	return &b, nil
}

func (w *worker) partition(id, name string) *partition {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.partitions[id]
	if p == nil {
		p = &partition{id: id, name: name}
		w.partitions[id] = p
	}
	return p
}

// process folds one leased batch and commits it with its ack.
func (w *worker) process(ctx context.Context, b *popAnswer) error {
	p := w.partition(b.PartitionID, b.Partition)
	p.mu.Lock()
	defer p.mu.Unlock()
	s, err := w.readShard(ctx, p, nil)
	if err != nil {
		return err
	}
	before := s.watermark
	payloads := make([]json.RawMessage, len(b.Messages))
	for i, m := range b.Messages {
		payloads[i] = m.Data
	}
	if late, bad := s.fold(payloads); late+bad > 0 {
		w.log.Warn("dropped events", "partition", p.name, "late", late, "malformed", bad)
	}
	ops, emits := s.commit(s.watermark, w.queryID, p.id, w.cfg.sink, p.name)
	if s.watermark != before {
		ops = append(ops, s.op("upsert", watermarkKey, watermark{s.watermark}))
	}
	last := b.Messages[len(b.Messages)-1]
	return w.cycle(ctx, p, ops, emits, map[string]any{
		"leaseId": b.LeaseID, "transactionId": last.TransactionID, "status": "completed", "count": len(b.Messages),
	})
}

// flushIfIdle closes the ripe windows of every partition seen, once pops
// have found nothing for the idle timeout since the broker last failed to
// answer: a pop lost in an outage may have left a lease that hides data
// until it expires.
func (w *worker) flushIfIdle(ctx context.Context) error {
	since := max(w.quietSince.Load(), w.c.lastFailure.Load())
	if since == 0 || time.Since(time.Unix(0, since)) < w.cfg.idle || !w.flushing.TryLock() {
		return nil
	}
	defer w.flushing.Unlock()
	w.mu.Lock()
	parts := make([]*partition, 0, len(w.partitions))
	for _, p := range w.partitions {
		parts = append(parts, p)
	}
	w.mu.Unlock()
	for _, p := range parts {
		if err := w.flush(ctx, p); err != nil {
			return err
		}
	}
	// The next round waits for another idle period.
	w.quietSince.Store(time.Now().UnixNano())
	return nil
}

func (w *worker) flush(ctx context.Context, p *partition) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ripe := time.Now().Add(-w.cfg.lateness).UnixMilli()
	s, err := w.readShard(ctx, p, &ripe)
	if err != nil || len(s.windows) == 0 {
		return err
	}
	ops, emits := s.commit(ripe, w.queryID, p.id, w.cfg.sink, p.name)
	w.log.Info("flushing idle partition", "partition", p.name, "windows", len(emits))
	return w.cycle(ctx, p, ops, emits, nil)
}

func (w *worker) readShard(ctx context.Context, p *partition, ripe *int64) (*shard, error) {
	req := map[string]any{"query_id": w.queryID, "partition_id": p.id, "key_prefix": statePrefix}
	if ripe != nil {
		req["ripe_at_or_before"] = *ripe
	}
	var out struct {
		Rows  []stateRow `json:"rows"`
		Error string     `json:"error"`
	}
	status, err := w.c.call(ctx, "POST", "/streams/v1/state/get", req, &out)
	switch {
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	case status != http.StatusOK:
		return nil, fmt.Errorf("read state: %d %s", status, out.Error)
	}
	return readShard(out.Rows)
}

// cycle commits state ops, emits and an ack (nil: an idle flush). A
// refused cycle is not an error: it is logged, and its batch redelivers
// (or, after a lost answer, had already committed).
func (w *worker) cycle(ctx context.Context, p *partition, ops []stateOp, emits []pushItem, ack map[string]any) error {
	body := map[string]any{"query_id": w.queryID, "partition_id": p.id, "consumer_group": w.group,
		"state_ops": ops, "push_items": emits, "ack": ack}
	var out cycleAnswer
	status, err := w.c.call(ctx, "POST", "/streams/v1/cycle", body, &out)
	switch {
	case err != nil:
		return fmt.Errorf("cycle: %w", err)
	case status != http.StatusOK:
		return fmt.Errorf("cycle: status %d %s", status, out.Error)
	case !out.Success:
		// The transaction rolled back. Most often the lease is gone: this
		// very cycle committed before an outage ate its answer, or the
		// lease expired and the batch went to another pop.
		w.log.Info("cycle refused; its batch is redelivered unless it already committed", "partition", p.name, "err", out.Error)
		return nil
	}
	for _, r := range out.PushResults {
		if r.Status == "duplicate" {
			w.log.Info("a window was already emitted; not stored again", "partition", p.name)
		}
	}
	return nil
}
