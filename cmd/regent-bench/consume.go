package main

import (
	"context"
	"fmt"
	"sync"
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
// and hand each answer to handle, until more() says enough, ctx ends, or a
// consumer's pops came back empty six times in a row. It returns the first
// error; one caused by ctx ending is none. record says whether the pops
// count in the latency figures.
func (e *Env) consume(ctx context.Context, path string, record bool, more func() bool,
	handle func(ctx context.Context, c *consumer) error) error {
	var wg sync.WaitGroup
	errc := make(chan error, e.C)
	for range e.C {
		wg.Go(func() {
			var c consumer
			idle := 0
			for more() && ctx.Err() == nil {
				status, body, err := e.DoInto(ctx, c.body, "GET", path, nil, record)
				if ctx.Err() != nil {
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
				if err := handle(ctx, &c); err != nil {
					if ctx.Err() == nil {
						errc <- err
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}
