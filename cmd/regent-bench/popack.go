package main

import (
	"context"
	"fmt"
	"net/url"
	"sync"
)

func init() { register("popack", runPopAck) }

// runPopAck pre-fills the queue with N messages over P partitions (not
// measured), then C consumers pop batches of B and acknowledge each batch
// with one ack/batch, until N distinct messages are consumed. It verifies
// that exactly N distinct messages came back, none twice.
func runPopAck(ctx context.Context, e *Env, res *Result) error {
	if !e.Prefilled {
		if err := e.prefill(ctx); err != nil {
			return err
		}
	}
	path := "/api/v1/pop/queue/" + url.PathEscape(e.Queue) + "?wait=true&timeout=1000&batch=" + fmt.Sprint(e.B)
	var mu sync.Mutex
	seen := make(map[string]int, e.N)
	dups := 0
	m := e.begin()
	end, distinct, err := e.consume(ctx, path, true, int64(e.N), func(ctx context.Context, c *consumer) (int64, error) {
		fresh := 0
		mu.Lock()
		for _, m := range c.pop.Messages {
			if seen[string(m.ID)]++; seen[string(m.ID)] == 1 {
				fresh++
			} else {
				dups++
			}
		}
		mu.Unlock()
		c.out = ackBody(c.out[:0], &c.pop)
		var err error
		if _, c.answer, err = e.DoInto(ctx, c.answer, "POST", "/api/v1/ack/batch", c.out, true); err != nil {
			return 0, err
		}
		return int64(fresh), nil
	})
	e.measured(res, m, end)
	ok := distinct == int64(e.N) && dups == 0
	res.Verified = &ok
	res.Verification = fmt.Sprintf("%d distinct of %d, %d delivered twice", distinct, e.N, dups)
	if err != nil {
		return err
	}
	return ctx.Err()
}

// ackBody appends the ack/batch of every message of a.
func ackBody(b []byte, a *popAnswer) []byte {
	b = append(b, `{"acknowledgments":[`...)
	for i, m := range a.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"transactionId":`...)
		b = appendJSONString(b, m.TransactionID)
		b = append(b, `,"partitionId":`...)
		b = appendJSONString(b, m.PartitionID)
		b = append(b, `,"leaseId":`...)
		b = appendJSONString(b, a.LeaseID)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}
