package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// consumer is one of the C consumers of consume, with the buffers it
// reuses from one batch to the next.
type consumer struct {
	pop    popAnswer
	body   []byte // the pop answer; pop's strings point into it
	out    []byte // for the consumer's own answers
	answer []byte // the answer to the consumer's request
}

// consume runs C consumers that pop from path (a pop route with its query)
// and hand each answer to handle, which returns how many messages it has
// consumed for good. The run ends when that count reaches total: consumers
// then parked in a long-poll on the empty queue are cancelled, not waited
// for, and end is when the last message was consumed. consumed is the count
// reached. A consumer also stops when its pops came back empty six times in
// a row. record says whether the pops count in the latency figures. The
// error is the first a consumer met; none is reported after the end.
func (e *Env) consume(ctx context.Context, path string, record bool, total int64,
	handle func(ctx context.Context, c *consumer) (int64, error)) (end time.Time, consumed int64, err error) {
	cctx, done := context.WithCancel(ctx)
	defer done()
	var count atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	errc := make(chan error, e.C)
	for range e.C {
		wg.Go(func() {
			var c consumer
			idle := 0
			for count.Load() < total && cctx.Err() == nil {
				status, body, err := e.DoInto(cctx, c.body, "GET", path, nil, record)
				if cctx.Err() != nil {
					return
				}
				if err != nil {
					errc <- err
					return
				}
				c.body = body
				if status == 204 {
					if idle++; idle > 5 {
						return // nothing left for this consumer
					}
					continue
				}
				idle = 0
				if err := c.pop.parse(body); err != nil {
					errc <- fmt.Errorf("pop answer: %w", err)
					return
				}
				n, err := handle(cctx, &c)
				if err != nil {
					if cctx.Err() == nil {
						errc <- err
					}
					return
				}
				if count.Add(n) >= total {
					once.Do(func() { end = time.Now(); done() })
				}
			}
		})
	}
	wg.Wait()
	once.Do(func() { end = time.Now() })
	close(errc)
	return end, count.Load(), <-errc
}
