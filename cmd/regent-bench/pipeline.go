package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/pipeline"
	"github.com/regent-mq/regent/streamworker"
)

func init() { register("pipeline", runPipeline) }

// benchPipeline is what the pipeline scenario runs: a tumbling minute of
// createdAt with count, sum and avg, over four keys, so that a cycle
// writes as many state rows as the cycle scenario's (four, and the clock).
var benchPipeline = v1.Pipeline{KeyBy: "string(payload.i % 4)",
	Window: &v1.Window{Type: v1.WindowTumbling, Size: &metav1.Duration{Duration: time.Minute}},
	Aggregate: []v1.Aggregate{{Name: "orders", Fn: v1.FnCount}, {Name: "total", Fn: v1.FnSum, Of: "payload.i"},
		{Name: "mean", Fn: v1.FnAvg, Of: "payload.i"}}}

// keyedPipeline is the pipeline scenario's with -keys: the workload a user
// would recognise, a tumbling minute of createdAt with count and sum of the
// amount per key, as the stock scenario folds it.
var keyedPipeline = v1.Pipeline{KeyBy: "payload.key",
	Window:    &v1.Window{Type: v1.WindowTumbling, Size: &metav1.Duration{Duration: time.Minute}},
	Aggregate: []v1.Aggregate{{Name: "count", Fn: v1.FnCount}, {Name: "sum", Fn: v1.FnSum, Of: "payload.amount"}}}

// runPipeline is Regent's own worker end to end, in this process: it
// pre-fills the source with N messages over P partitions (not measured),
// then runs streamworker with C loops popping batches of B, each read of
// state, fold and cycle as the worker does them, until every message is
// folded. The tool's CPU is the worker's. Compare its msgs/s with the
// cycle scenario's at the same C and B: that is the broker's limit for a
// worker that does nothing.
func runPipeline(ctx context.Context, e *Env, res *Result) error {
	spec := benchPipeline
	if e.Keys > 0 {
		spec = keyedPipeline
	}
	sink := e.Queue + ".out"
	e.made = append(e.made, sink)
	return runWorker(ctx, e, res, spec, e.Queue+".pipeline", sink)
}

// runWorker pre-fills the source unless it is, then runs Regent's worker
// on spec, registered as query, into the sink queue (none: the query's
// table sink), until it has folded every message.
func runWorker(ctx context.Context, e *Env, res *Result, spec v1.Pipeline, query, sink string) error {
	if !e.Prefilled {
		if err := e.prefill(ctx); err != nil {
			return err
		}
	}
	prog, err := pipeline.Compile(spec)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	w := streamworker.New(streamworker.Config{Broker: e.URL, Token: e.Token, Query: query, Source: e.Queue,
		Sink: sink, Program: prog, Batch: e.B, Concurrency: e.C, Wait: time.Second, Drain: 30 * time.Second,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: streamworker.NewMetrics(reg)})
	run, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	m := e.begin()
	go func() { done <- w.Run(run) }()
	var end time.Time
	for {
		in, cycles, err := folded(reg)
		if err != nil {
			return err
		}
		if in >= float64(e.N) {
			end = time.Now()
			e.measured(res, m, end)
			res.CyclesPerSec = cycles / res.Seconds
			// A request is a cycle: its pop, state read and commit.
			res.Requests = int(cycles)
			break
		}
		select {
		case err := <-done:
			return fmt.Errorf("the worker stopped at %.0f of %d messages: %w", in, e.N, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		return err
	}
	ok := true
	res.Verified = &ok
	res.Verification = fmt.Sprintf("the worker folded all %d messages", e.N)
	return nil
}

// folded reads the worker's events-in and fold-cycle counters.
func folded(reg *prometheus.Registry) (in, cycles float64, err error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, 0, fmt.Errorf("read the worker's metrics: %w", err)
	}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			switch f.GetName() {
			case "regent_worker_events_in_total":
				in = s.GetCounter().GetValue()
			case "regent_worker_cycles_total":
				cycles += s.GetCounter().GetValue()
			}
		}
	}
	return in, cycles, nil
}
