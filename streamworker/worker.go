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
//     line. The cycle also asks for the partition's next batch
//     ("next_batch": B, Regent's): the answer's "next" is a pop's answer
//     under a new lease, claimed in the cycle's transaction, and
//     "state_updated_at" the updated_at of the rows it wrote. The worker
//     folds that batch into the state it holds, without step 3, and goes
//     on so for up to a second; then, or when "next" is null, it lets the
//     partition go and pops (step 2).
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
// whose leaseId is not the partition's live lease. A fold starts from what
// the last committed cycle left: the state read again, or the state this
// worker's own last cycle wrote, held while that cycle's next batch kept
// the partition leased to it. The lease passed from batch to batch in
// one transaction, under the cursor row's lock, so no other cycle could
// write the state in between (a flush is deferred while a lease is live);
// and any refusal drops the held state, which is read again.
//
//   - The broker dies before the commit: nothing of the cycle happened. The
//     worker retries the same request until the broker is back; the lease is
//     still live (or has expired, and the cycle is refused), so the batch is
//     folded once either way.
//   - The broker dies after the commit, before the answer: the retried cycle
//     is refused (the commit released the lease, or passed the partition to
//     a new lease of a next batch the worker never saw), the worker drops
//     the batch and its held state and pops the next one. Nothing is
//     applied twice; a next batch claimed so is redelivered when its lease
//     expires.
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
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/api/streams/wire"
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
	// table: the query has a table sink (the registration's header
	// wire.SinkTableHeader), so every cycle also carries its outputs as
	// table_rows, which the broker writes in the cycle's transaction.
	table bool
	group string
	ready atomic.Bool

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
	if w.cfg.Sink == "" && !w.table {
		return fmt.Errorf("query %q has no sink: give it a sink queue (--sink), or a table sink (the StreamQuery's spec.sink)", w.cfg.Query)
	}
	w.ready.Store(true)
	w.log.Info("query registered", "query", w.cfg.Query, "query_id", w.queryID, "config_hash", w.cfg.Program.Hash,
		"source", w.cfg.Source, "sink", w.cfg.Sink, "table_sink", w.table)
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
	w.table = header.Get(wire.SinkTableHeader) != ""
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
		if err := w.process(stop, ctx, b); err != nil {
			return err
		}
	}
	return nil
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
