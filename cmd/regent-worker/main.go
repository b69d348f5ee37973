// Command regent-worker is Regent's reference streaming worker. It counts
// events per key in one-minute tumbling windows of event time, using nothing
// but HTTP: the three /streams/v1 routes and the queue's pop. It is meant to
// be read: a client in a language without a Queen streams SDK does exactly
// what this program does.
//
//	regent-worker -broker http://localhost:6632 -query orders.per_minute \
//	    -source orders -sink orders.per_minute
//	regent-worker -print-config-hash   # the configHash its StreamQuery declares
//
// An event is a source message whose payload is {"key": "acme", "ts": 1760...}
// (ts in epoch milliseconds). A closed window is pushed to the sink as
// {"key", "windowStart", "windowEnd" (RFC 3339), "count"}, on the sink
// partition named like the source partition it was folded from.
//
// # The protocol
//
//  1. Register: POST /streams/v1/queries {name, source_queue, sink_queue,
//     config_hash}. The hash names the operator chain (here "tumb:60 count"):
//     a 409 means the query was registered with another chain, and this
//     worker stops rather than fold new events into old accumulators. The
//     answer's query_id is the query's identity from then on.
//  2. Pop a batch: GET /api/v1/pop/queue/<source>?batch=B&wait=true
//     &consumerGroup=streams.<name>. The answer names the partition
//     (partitionId) and the lease (leaseId) that guards it.
//  3. Read the partition's state: POST /streams/v1/state/get with
//     key_prefix "tumb:60\u001f", which returns every open window of the
//     operator on that partition, and its watermark row.
//  4. Fold in memory. An event lands in the window [floor(ts/60s)*60s, +60s),
//     kept under the state key "tumb:60\u001f<windowStart>\u001f<key>" as
//     {"key", "windowStart", "windowEnd", "count"} (epoch ms). The partition's
//     watermark is the largest event time it has seen; a window whose end is
//     at or before it is closed. An event whose window closed already is late
//     and is dropped (and counted in the log).
//  5. Commit: POST /streams/v1/cycle with the upserts of the open windows,
//     the deletes and sink pushes of the closed ones, the new watermark, and
//     the ack {leaseId, status: "completed", count}. A 200 with success false
//     is a cycle that did not happen: read the body, not the status line.
//  6. When the source has been quiet for the idle timeout, flush: for every
//     partition seen, state/get with ripe_at_or_before (now minus the
//     allowed lateness) and a cycle with "ack": null that emits and deletes
//     the ripe windows.
//
// # Why every event is counted exactly once
//
// A cycle is one PostgreSQL transaction: its state writes, its sink pushes
// and its ack commit together or not at all, and the procedure refuses the
// cycle when leaseId is not the partition's live lease. State is read again
// before every fold, never cached, so a fold always starts from what the
// last committed cycle left.
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
//   - An idle flush takes no lease, so a retried flush could emit again. Each
//     emit carries a deterministic transactionId (the query, source
//     partition, window start and key), and the broker stores a transaction
//     id only once per sink partition, so the repeat is answered "duplicate"
//     and stored nowhere. The same id stops a window from ever being emitted
//     twice by any path.
//   - A flush can run in one process while another folds the same
//     partition. The broker refuses a flush while the partition is leased
//     or holds unacknowledged messages, and a cycle whose state ops name an
//     updated_at (if_updated_at) that the row no longer has: every op of
//     this worker names the one it read, so a flush that read a window
//     before a fold changed or closed it is refused, and so is a fold that
//     read one before a flush closed it. In one process, a partition's
//     folds and flushes also take turns.
//
// The flush is the one place that needs care: it must not close a window
// that still has events waiting in the source. The broker refuses a flush
// while the partition holds messages the group has not acknowledged, or a
// lease (one orphaned by a lost pop answer hides its partition's data until
// it expires); the worker also flushes only after every pop for the idle
// timeout found nothing. Events later than that, relative to a window
// already flushed, are dropped like any late event.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "regent-worker:", err)
		os.Exit(2)
	}
	if cfg.printHash {
		fmt.Println(configHash)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, cfg, log); err != nil && ctx.Err() == nil {
		log.Error("worker stopped", "err", err)
		os.Exit(1)
	}
}

// config is what the worker is told.
type config struct {
	broker      string
	token       string
	query       string
	source      string
	sink        string
	batch       int
	workers     int
	idle        time.Duration
	lateness    time.Duration
	waitTimeout time.Duration
	printHash   bool
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("regent-worker", flag.ContinueOnError)
	fs.StringVar(&c.broker, "broker", "http://localhost:6632", "broker base URL")
	fs.StringVar(&c.token, "token", os.Getenv("REGENT_TOKEN"), "bearer token, when the broker has auth on (env REGENT_TOKEN)")
	fs.StringVar(&c.query, "query", "", "query name (required)")
	fs.StringVar(&c.source, "source", "", "source queue (required)")
	fs.StringVar(&c.sink, "sink", "", "sink queue for closed windows (required)")
	fs.IntVar(&c.batch, "batch", 100, "messages per pop")
	fs.IntVar(&c.workers, "workers", 2, "concurrent pop-fold-commit loops")
	fs.DurationVar(&c.idle, "idle", 10*time.Second, "quiet time before open windows are flushed; must exceed the source's leaseTime")
	fs.DurationVar(&c.lateness, "lateness", 0, "how long after its end a window may still receive events, for the idle flush")
	fs.DurationVar(&c.waitTimeout, "wait", 2*time.Second, "long-poll timeout of each pop")
	fs.BoolVar(&c.printHash, "print-config-hash", false, "print the config_hash this worker registers with (a StreamQuery's configHash) and exit")
	if err := fs.Parse(args); err != nil || c.printHash {
		return c, err
	}
	if c.query == "" || c.source == "" || c.sink == "" {
		return c, fmt.Errorf("-query, -source and -sink are required")
	}
	if c.batch < 1 || c.workers < 1 {
		return c, fmt.Errorf("-batch and -workers must be at least 1")
	}
	return c, nil
}
