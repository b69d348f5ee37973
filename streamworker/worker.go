// Package streamworker runs a compiled pipeline (package pipeline) for one
// query against a broker, exactly once, using nothing but HTTP: the three
// /streams/v1 routes, the queue's pop, and the queue's partition list. It
// is meant to be read: a client in a language without a Queen streams SDK
// does what this package does.
//
// # The protocol
//
//  1. Register: POST /streams/v1/queries {name, source_queue, sink_queue,
//     config_hash}. The hash is the pipeline's (v1alpha1.Pipeline.ConfigHash):
//     a 409 means the query was registered with another pipeline, and the
//     worker stops rather than fold new events into old accumulators. The
//     answer's query_id is the query's identity from then on.
//  2. Pop a batch: GET /api/v1/pop/queue/<source>?batch=B&wait=true
//     &consumerGroup=streams.<name>. The answer names the partition
//     (partitionId) and the lease (leaseId) that guards it. Several loops
//     pop at once, so several partitions fold at once, each under its own
//     lease; one partition's folds and flushes in this process take turns.
//  3. Read the partition's state: POST /streams/v1/state/get with
//     key_prefix pipeline.Prefix, which returns the partition's open
//     windows and its clock row (watermark, and when a fold last
//     committed), each with its updated_at.
//  4. Fold in memory (pipeline.Shard): a window whose end plus the allowed
//     lateness is at or before the watermark is closed; an event whose
//     windows are all closed is late (dropped and counted, or pushed to the
//     late queue).
//  5. Commit: POST /streams/v1/cycle with the upserts of the windows folded
//     into, the deletes and sink pushes of the closed ones, the clock row,
//     and the ack {leaseId, status: "completed", count}. A 200 with success
//     false is a cycle that did not happen: read the body, not the status
//     line.
//  6. When every pop has found nothing for the pipeline's idleFlush, flush:
//     for each partition of the source (GET /api/v1/resources/queues/<source>)
//     whose last fold is older than idleFlush, read the windows ripe by the
//     wall clock (ripe_at_or_before) and the clock row, and commit a cycle
//     with "ack": null that emits and deletes them and moves the watermark
//     to the wall clock.
//
// # Why every event is counted exactly once
//
// A cycle is one PostgreSQL transaction: its state writes, its sink pushes
// and its ack commit together or not at all, and the broker refuses a cycle
// whose leaseId is not the partition's live lease. State is read again
// before every fold, never cached, so a fold starts from what the last
// committed cycle left.
//
//   - The broker dies before the commit: nothing of the cycle happened. The
//     worker retries the same request until the broker is back; the lease is
//     still live (or has expired, and the cycle is refused), so the batch is
//     folded once either way.
//   - The broker dies after the commit, before the answer: the retried cycle
//     is refused (the commit released the lease), the worker drops the batch
//     and pops the next one. Nothing is applied twice.
//   - A pop whose answer is lost leaves a lease nobody holds: the batch is
//     redelivered when it expires, to a fold that starts from committed state.
//   - A flush takes no lease, and may run in another process beside a fold
//     of the same partition. The broker defers a flush (success, nothing
//     applied, "deferred" saying why) while a worker holds a live lease on
//     the partition for the group, or while the partition holds messages
//     the group has not acknowledged. Every state op on a row
//     that was read carries "if_updated_at", the updated_at it was read
//     with, and the broker refuses the cycle when the row has changed or
//     gone since; and every cycle, fold or flush, writes the clock row. So
//     of two cycles that read the same state, the second to commit is
//     refused: a fold then folds its batch again from the new state (its
//     lease is still live), and a flush waits for the next idle period. Rows
//     a cycle creates carry no precondition; they did not exist when it
//     read, and only a cycle that read the clock row after them could have
//     seen them.
//   - Each emit carries a deterministic transactionId (the pipeline's config
//     hash, the query, the source partition, the window start and key; or
//     the source message for a stateless or late output), and the broker
//     stores a transaction id
//     only once per sink partition: a retried flush whose answer was lost
//     is answered "duplicate", and no path stores an output twice.
//
// A flush must not close a window that still has events waiting in the
// source; it would make them late. The broker defers it while the
// partition holds unacknowledged messages or a live lease (one orphaned by
// a lost pop answer hides its partition's data until it expires); and the
// worker tries only after its pops found nothing for idleFlush since the
// broker last failed to answer, and only on partitions no fold has
// committed on for idleFlush.
package streamworker

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

	"github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/streams/wire"
	"github.com/regent-mq/regent/pipeline"
)

// Config is what a worker is told.
type Config struct {
	Broker, Token       string
	Query, Source, Sink string
	Program             *pipeline.Program
	Batch               int           // messages per pop
	Concurrency         int           // pop-fold-commit loops, so partitions folded at once
	Wait                time.Duration // long-poll timeout of each pop
	// Drain is how long a stop waits for the pops and cycles in flight.
	Drain   time.Duration
	Log     *slog.Logger
	Metrics *Metrics
}

// Worker runs one query's pipeline.
type Worker struct {
	cfg     Config
	c       *client
	log     *slog.Logger
	m       *Metrics
	queryID string
	// generation is the query's reset generation the registration
	// answered (in the header wire.ResetGenerationHeader); every cycle carries it, and the broker refuses them with a
	// 409 once a reset or a restore has moved it: this worker's pipeline
	// is then no longer the query's, and it stops.
	generation *int64
	group      string
	ready      atomic.Bool

	mu         sync.Mutex
	partitions map[string]*partition // by id: every partition seen

	// quietSince is when pops started finding nothing (unix nanoseconds;
	// 0 while they find data). Only one loop flushes at a time.
	quietSince atomic.Int64
	flushing   sync.Mutex
}

// partition is a source partition. Its mutex keeps this process's folds
// and flushes of it one at a time.
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
		CreatedAt     time.Time       `json:"createdAt"`
	} `json:"messages"`
}

// New makes a worker; Run runs it.
func New(cfg Config) *Worker {
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Worker{cfg: cfg, c: newClient(cfg.Broker, cfg.Token, cfg.Log), log: cfg.Log, m: cfg.Metrics,
		group: v1alpha1.ConsumerGroup(cfg.Query), partitions: map[string]*partition{}}
}

// Ready says whether the query is registered and the broker answered last.
func (w *Worker) Ready() bool {
	return w.ready.Load() && w.c.lastAnswer.Load() >= w.c.lastFailure.Load()
}

// Run registers the query and folds until ctx ends. Then each loop
// finishes what it has in flight, a pop and the cycle of its batch, so
// that no lease is left to expire, for at most cfg.Drain.
func (w *Worker) Run(ctx context.Context) error {
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		select {
		case <-work.Done():
		case <-time.After(w.cfg.Drain):
			w.log.Warn("stopping: the cycles in flight did not finish in time", "drain", w.cfg.Drain)
			cancel()
		}
	})
	defer stop()
	if err := w.register(work); err != nil {
		return err
	}
	w.ready.Store(true)
	w.log.Info("query registered", "query", w.cfg.Query, "query_id", w.queryID, "config_hash", w.cfg.Program.Hash,
		"source", w.cfg.Source, "sink", w.cfg.Sink)
	errs := make(chan error, w.cfg.Concurrency)
	for range w.cfg.Concurrency {
		go func() { errs <- w.loop(ctx, work) }()
	}
	var first error
	for range w.cfg.Concurrency {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (w *Worker) register(ctx context.Context) error {
	var out struct {
		QueryID string `json:"query_id"`
		Error   string `json:"error"`
	}
	status, header, err := w.c.callHeader(ctx, "POST", "/streams/v1/queries", map[string]any{
		"name": w.cfg.Query, "source_queue": w.cfg.Source, "sink_queue": w.cfg.Sink, "config_hash": w.cfg.Program.Hash,
	}, &out)
	switch {
	case err != nil:
		return fmt.Errorf("register: %w", err)
	case status != http.StatusOK:
		return fmt.Errorf("register query %q with config hash %s: %d %s", w.cfg.Query, w.cfg.Program.Hash, status, out.Error)
	}
	w.queryID = out.QueryID
	// A broker of the previous release sends no generation: its cycles
	// then check none.
	if g := header.Get(wire.ResetGenerationHeader); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return fmt.Errorf("register query %q: header %s %q: %w", w.cfg.Query, wire.ResetGenerationHeader, g, err)
		}
		w.generation = &n
	}
	return nil
}

// loop pops and folds until stop ends, then returns once its pop in
// flight, and the batch it brought, are done.
func (w *Worker) loop(stop, ctx context.Context) error {
	for stop.Err() == nil {
		b, err := w.pop(ctx)
		if err != nil {
			return err
		}
		if b == nil || len(b.Messages) == 0 {
			w.quietSince.CompareAndSwap(0, time.Now().UnixNano())
			if stop.Err() == nil {
				if err := w.flushIfIdle(ctx); err != nil {
					return err
				}
			}
			continue
		}
		w.quietSince.Store(0)
		if err := w.process(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

func (w *Worker) pop(ctx context.Context) (*popAnswer, error) {
	q := url.Values{
		"batch":         {strconv.Itoa(w.cfg.Batch)},
		"wait":          {"true"},
		"timeout":       {strconv.FormatInt(w.cfg.Wait.Milliseconds(), 10)},
		"consumerGroup": {w.group},
	}
	var b popAnswer
	status, err := w.c.call(ctx, "GET", "/api/v1/pop/queue/"+url.PathEscape(w.cfg.Source)+"?"+q.Encode(), nil, &b)
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

func (w *Worker) partition(id, name string) *partition {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.partitions[id]
	if p == nil {
		p = &partition{id: id, name: name}
		w.partitions[id] = p
	}
	return p
}

func (w *Worker) scope(p *partition) pipeline.Scope {
	return pipeline.Scope{QueryID: w.queryID, PartitionID: p.id, Partition: p.name, Sink: w.cfg.Sink}
}

// refolds is how many times a batch is folded again from fresh state when
// its cycle is refused while its lease may still be live.
const refolds = 3

// process folds one leased batch and commits it with its ack.
func (w *Worker) process(ctx context.Context, b *popAnswer) error {
	p := w.partition(b.PartitionID, b.Partition)
	p.mu.Lock()
	defer p.mu.Unlock()
	events := make([]pipeline.Event, len(b.Messages))
	for i, m := range b.Messages {
		events[i] = pipeline.Event{Data: m.Data, TransactionID: m.TransactionID, CreatedAt: m.CreatedAt}
	}
	last := b.Messages[len(b.Messages)-1]
	completed, count := "completed", int64(len(b.Messages))
	ack := &wire.CycleAck{LeaseID: b.LeaseID, TransactionID: last.TransactionID, Status: &completed, Count: &count}
	for range refolds {
		var rows []pipeline.Row
		if w.cfg.Program.Stateful() {
			var err error
			if rows, err = w.readState(ctx, p, map[string]any{"key_prefix": pipeline.Prefix}); err != nil {
				return err
			}
		}
		s, err := w.cfg.Program.NewShard(w.scope(p), rows)
		if err != nil {
			return err
		}
		s.Fold(events)
		now := time.Now()
		ops, pushes, err := s.Commit(&now)
		if err != nil {
			return err
		}
		done, err := w.cycle(ctx, p, kindFold, ops, pushes, ack)
		if err != nil {
			return err
		}
		if done {
			w.counted(p, s)
			return nil
		}
	}
	w.log.Info("batch left to redelivery", "partition", p.name, "refolds", refolds)
	return nil
}

func (w *Worker) counted(p *partition, s *pipeline.Shard) {
	w.m.eventsIn.Add(float64(s.In))
	w.m.filtered.Add(float64(s.Filtered))
	w.m.late.Add(float64(s.Late))
	w.m.failed.Add(float64(s.Failed))
	w.m.emitted.Add(float64(s.Emitted))
	for _, err := range s.Errors {
		w.log.Warn("an event or window failed its expression and was dropped", "partition", p.name, "err", err)
	}
}

// flushIfIdle closes the windows ripe by the wall clock on every quiet
// partition of the source, once pops have found nothing for idleFlush
// since the broker last failed to answer: a pop lost in an outage may have
// left a lease that hides data until it expires.
func (w *Worker) flushIfIdle(ctx context.Context) error {
	idle := w.cfg.Program.IdleFlush
	since := max(w.quietSince.Load(), w.c.lastFailure.Load())
	if !w.cfg.Program.Stateful() || since == 0 || time.Since(time.Unix(0, since)) < idle || !w.flushing.TryLock() {
		return nil
	}
	defer w.flushing.Unlock()
	var q struct {
		Partitions []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"partitions"`
	}
	status, err := w.c.call(ctx, "GET", "/api/v1/resources/queues/"+url.PathEscape(w.cfg.Source), nil, &q)
	switch {
	case err != nil:
		return fmt.Errorf("list the source's partitions: %w", err)
	case status == http.StatusNotFound:
		q.Partitions = nil // nothing pushed yet
	case status != http.StatusOK:
		return fmt.Errorf("list the source's partitions: status %d", status)
	}
	for _, e := range q.Partitions {
		if err := w.flush(ctx, w.partition(e.ID, e.Name)); err != nil {
			return err
		}
	}
	// The next round waits for another idle period.
	w.quietSince.Store(time.Now().UnixNano())
	return nil
}

func (w *Worker) flush(ctx context.Context, p *partition) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	ripe, err := w.readState(ctx, p, map[string]any{"key_prefix": pipeline.Prefix,
		"ripe_at_or_before": now.Add(-w.cfg.Program.Lateness()).UnixMilli()})
	if err != nil || len(ripe) == 0 {
		return err
	}
	clock, err := w.readState(ctx, p, map[string]any{"keys": []string{pipeline.ClockKey}})
	if err != nil {
		return err
	}
	s, err := w.cfg.Program.NewShard(w.scope(p), append(ripe, clock...))
	if err != nil {
		return err
	}
	if now.UnixMilli()-s.FoldedAt() < w.cfg.Program.IdleFlush.Milliseconds() {
		return nil // folded recently, maybe by another worker: not idle
	}
	s.Flush(now)
	ops, pushes, err := s.Commit(nil)
	if err != nil {
		return err
	}
	w.log.Info("flushing an idle partition", "partition", p.name, "windows", s.Emitted)
	done, err := w.cycle(ctx, p, kindFlush, ops, pushes, nil)
	if done {
		w.counted(p, s)
	}
	return err
}

func (w *Worker) readState(ctx context.Context, p *partition, filter map[string]any) ([]pipeline.Row, error) {
	filter["query_id"], filter["partition_id"] = w.queryID, p.id
	var out struct {
		Rows  []pipeline.Row `json:"rows"`
		Error string         `json:"error"`
	}
	status, err := w.c.call(ctx, "POST", "/streams/v1/state/get", filter, &out)
	switch {
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	case status != http.StatusOK:
		return nil, fmt.Errorf("read state: %d %s", status, out.Error)
	}
	return out.Rows, nil
}

const (
	kindFold  = "fold"
	kindFlush = "flush"
)

// cycle commits state ops, pushes and an ack (nil: a flush), and reports
// whether it committed. A refused cycle is not an error: it is logged and
// counted; its batch is folded again or redelivered (or, after a lost
// answer, had already committed).
func (w *Worker) cycle(ctx context.Context, p *partition, kind string, ops []pipeline.StateOp, pushes []pipeline.Push, ack *wire.CycleAck) (bool, error) {
	body, err := w.cycleBody(p, ops, pushes, ack)
	if err != nil {
		return false, err
	}
	start := time.Now()
	var out wire.CycleResponse
	status, err := w.c.call(ctx, "POST", "/streams/v1/cycle", body, &out)
	switch {
	case err != nil:
		return false, fmt.Errorf("cycle: %w", err)
	case status != http.StatusOK:
		return false, fmt.Errorf("cycle: status %d %s", status, out.Error)
	}
	w.m.cycleSeconds.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	if !out.Success {
		// The transaction rolled back: the lease is gone (this very cycle
		// committed before an outage ate its answer, or the lease expired
		// and the batch went to another pop), or a row changed since it
		// was read.
		w.m.refused.WithLabelValues(kind).Inc()
		w.log.Info("cycle refused", "kind", kind, "partition", p.name, "err", out.Error)
		return false, nil
	}
	if out.Deferred != "" {
		w.m.deferred.Inc()
		w.log.Info("flush deferred", "partition", p.name, "why", out.Deferred)
		return false, nil
	}
	w.m.cycles.WithLabelValues(kind).Inc()
	for _, r := range out.PushResults {
		if r.Status == "duplicate" {
			w.log.Info("an output was already stored; not stored again", "partition", p.name)
		}
	}
	return true, nil
}

// cycleBody is the cycle's request, with every member Queen's clients send:
// state_ops and push_items as arrays, even empty, and a flush's ack null.
func (w *Worker) cycleBody(p *partition, ops []pipeline.StateOp, pushes []pipeline.Push, ack *wire.CycleAck) (*wire.CycleRequest, error) {
	if ops == nil {
		ops = []pipeline.StateOp{}
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encode state ops: %w", err)
	}
	items := make([]wire.PushItem, len(pushes))
	for i, x := range pushes {
		items[i] = wire.PushItem{Queue: x.Queue, Partition: x.Partition, Payload: x.Payload, TransactionID: x.TransactionID}
	}
	return &wire.CycleRequest{QueryID: w.queryID, PartitionID: p.id, ConsumerGroup: w.group, StateOps: raw,
		PushItems: items, Ack: ack, ResetGeneration: w.generation}, nil
}
