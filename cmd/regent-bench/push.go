package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

func init() { register("push", runPush) }

// runPush: C clients push N messages in requests of B, each request to one
// of P partitions in turn.
func runPush(ctx context.Context, e *Env, res *Result) error {
	start := time.Now()
	err := e.fill(ctx, true)
	res.Seconds = time.Since(start).Seconds()
	return err
}

// fill pushes N messages with C clients; record says whether the requests
// count in the latency figures.
func (e *Env) fill(ctx context.Context, record bool) error {
	requests := (e.N + e.B - 1) / e.B
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, e.C)
	for c := 0; c < e.C; c++ {
		wg.Go(func() {
			for {
				r := int(next.Add(1)) - 1
				if r >= requests || ctx.Err() != nil {
					return
				}
				n := min(e.B, e.N-r*e.B)
				if _, _, err := e.Do(ctx, "POST", "/api/v1/push", e.pushBody(partition(r%e.P), r*e.B, n), record); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	return ctx.Err()
}
