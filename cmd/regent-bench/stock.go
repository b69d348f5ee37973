package main

import (
	"context"
	"fmt"
	"time"

	"github.com/regent-mq/regent/test/stockworker"
)

func init() { register("stock", runStock) }

// runStock is the pipeline scenario's work done by a worker written as the
// stock Queen streams SDKs write theirs (test/stockworker), in this
// process: it pre-fills the source with N messages over P partitions (not
// measured), then runs C fold loops popping batches of B, each with its pop,
// state/get of the batch's keys and cycle, and the idle flush on a timer of
// its own, until every message is folded. With -keys it counts and sums
// each key's amount in tumbling minutes, as the pipeline scenario's
// keyedPipeline does; the tool's CPU is the worker's.
func runStock(ctx context.Context, e *Env, res *Result) error {
	if !e.Prefilled {
		if err := e.prefill(ctx); err != nil {
			return err
		}
	}
	sink := e.Queue + ".out"
	e.made = append(e.made, sink)
	w := &stockworker.Worker{Base: e.URL, Token: e.Token, Query: e.Queue + ".stock", Source: e.Queue, Sink: sink,
		Size: time.Minute, Idle: time.Second, Grace: time.Second, Batch: e.B, Folders: e.C, Touched: true}
	if err := w.Register(ctx); err != nil {
		return err
	}
	run, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	m := e.begin()
	go func() {
		w.Run(run)
		close(done)
	}()
	for w.Folded() < int64(e.N) {
		select {
		case <-done:
			return fmt.Errorf("the stock worker stopped at %d of %d messages", w.Folded(), e.N)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	e.measured(res, m, time.Now())
	stop()
	<-done
	if errs := w.Errs(); len(errs) > 0 {
		return fmt.Errorf("the stock worker went on from %d errors, the first: %w", len(errs), errs[0])
	}
	ok := w.Folded() == int64(e.N)
	res.Verified = &ok
	res.Verification = fmt.Sprintf("the stock worker's cycles committed %d of %d messages", w.Folded(), e.N)
	return nil
}
