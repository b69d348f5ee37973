// Package batch joins requests for the same kind of database work into one
// call. A request that finds a call free runs at once, alone, so a lone
// client waits for nothing; one that arrives while every call is in flight
// waits, and the next call takes every request then waiting. There is no
// timer: the batch is whatever queued while the database was busy, so it
// grows with the load, and each call's fixed cost (a round trip, statement
// setup, the commit's WAL flush) is paid once for all of them.
package batch

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Joiner runs calls of its run function over batches of requests. It is
// safe for concurrent use.
type Joiner[T any] struct {
	run      func(ctx context.Context, batch []T)
	calls    int // in flight at most
	maxBatch int
	sizes    prometheus.Observer // requests per call
	queued   prometheus.Gauge    // requests waiting

	mu       sync.Mutex
	inflight int
	waiting  []*waiter[T]
}

type waiter[T any] struct {
	ctx   context.Context
	req   T
	done  chan struct{}
	taken bool
}

// New returns a Joiner with at most calls calls of run in flight, each over
// at most maxBatch requests. run answers every request of its batch (they
// carry their own outcome) and must not keep the slice. sizes observes the
// requests of each call, and queued counts those waiting.
func New[T any](calls, maxBatch int, sizes prometheus.Observer, queued prometheus.Gauge,
	run func(ctx context.Context, batch []T)) *Joiner[T] {
	return &Joiner[T]{run: run, calls: max(calls, 1), maxBatch: max(maxBatch, 1), sizes: sizes, queued: queued}
}

// Do returns once a call of run has answered req. A request still waiting
// when ctx ends leaves the queue with ctx's error; one already taken into a
// call is answered (that call may commit it).
func (j *Joiner[T]) Do(ctx context.Context, req T) error {
	j.mu.Lock()
	if j.inflight < j.calls {
		j.inflight++
		j.mu.Unlock()
		j.sizes.Observe(1)
		j.run(ctx, []T{req})
		j.next()
		return nil
	}
	w := &waiter[T]{ctx: ctx, req: req, done: make(chan struct{})}
	j.waiting = append(j.waiting, w)
	j.mu.Unlock()
	j.queued.Inc()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	j.mu.Lock()
	if !w.taken {
		for i, o := range j.waiting {
			if o == w {
				j.waiting = append(j.waiting[:i], j.waiting[i+1:]...)
				j.queued.Dec()
				break
			}
		}
		j.mu.Unlock()
		return ctx.Err()
	}
	j.mu.Unlock()
	<-w.done
	return nil
}

// next hands the call slot just freed to the requests waiting, or frees it.
// The call runs on a goroutine of its own, so that the request that freed
// the slot is answered now; its context is the first waiter's, without its
// cancellation, since it carries the others too.
func (j *Joiner[T]) next() {
	j.mu.Lock()
	if len(j.waiting) == 0 {
		j.inflight--
		j.mu.Unlock()
		return
	}
	n := min(len(j.waiting), j.maxBatch)
	ws := make([]*waiter[T], n)
	copy(ws, j.waiting)
	rest := copy(j.waiting, j.waiting[n:])
	clear(j.waiting[rest:])
	j.waiting = j.waiting[:rest]
	for _, w := range ws {
		w.taken = true
	}
	j.mu.Unlock()
	j.queued.Sub(float64(n))
	j.sizes.Observe(float64(n))
	go func() {
		reqs := make([]T, n)
		for i, w := range ws {
			reqs[i] = w.req
		}
		j.run(context.WithoutCancel(ws[0].ctx), reqs)
		for _, w := range ws {
			close(w.done)
		}
		j.next()
	}()
}
