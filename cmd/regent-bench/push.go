package main

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

func init() { register("push", runPush) }

// prefillClients is the least concurrency of a pre-fill, which is setup: a
// C=1 run need not wait for one client to fill its queue.
const prefillClients = 8

// runPush: C clients push N messages in requests of B, each request to one
// of P partitions in turn, with transactionIds when TxIDs is set. It
// verifies that every item answered queued: the ids are fresh, so a
// duplicate is the broker's mistake.
func runPush(ctx context.Context, e *Env, res *Result) error {
	m := e.begin()
	t, err := e.fill(ctx, e.C, true, e.TxIDs)
	e.measured(res, m, time.Now())
	txids := e.TxIDs
	res.TransactionIDs = &txids
	ok := t.queued.Load() == int64(e.N) && t.duplicate.Load() == 0
	res.Verified = &ok
	res.Verification = fmt.Sprintf("%d items queued of %d, %d answered duplicate", t.queued.Load(), e.N, t.duplicate.Load())
	return err
}

// prefill pushes the N messages a consumer scenario consumes, not measured.
// Its items carry no transactionIds: those cost the push alone, and the
// consumers see the same frames either way.
func (e *Env) prefill(ctx context.Context) error {
	if _, err := e.fill(ctx, max(e.C, prefillClients), false, false); err != nil {
		return fmt.Errorf("pre-fill: %w", err)
	}
	return nil
}

// tally counts the item statuses of push answers.
type tally struct{ queued, duplicate atomic.Int64 }

// add counts the statuses of one push answer. Those are its only JSON
// strings "queued" and "duplicate": an answer does not repeat the payloads.
func (t *tally) add(answer []byte) {
	t.queued.Add(int64(bytes.Count(answer, []byte(`"queued"`))))
	t.duplicate.Add(int64(bytes.Count(answer, []byte(`"duplicate"`))))
}

// fill pushes N messages with the given number of clients; record says
// whether the requests count in the latency figures, and txids whether the
// items carry transactionIds.
func (e *Env) fill(ctx context.Context, clients int, record, txids bool) (*tally, error) {
	requests := (e.N + e.B - 1) / e.B
	var t tally
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, clients)
	for range clients {
		wg.Go(func() {
			var answer []byte
			for {
				r := int(next.Add(1)) - 1
				if r >= requests || ctx.Err() != nil {
					return
				}
				n := min(e.B, e.N-r*e.B)
				var err error
				_, answer, err = e.DoInto(ctx, answer, "POST", "/api/v1/push", e.pushBody(partition(r%e.P), r*e.B, n, txids), record)
				if err != nil {
					errc <- err
					return
				}
				t.add(answer)
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return &t, err
	}
	return &t, ctx.Err()
}
