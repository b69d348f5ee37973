package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

func init() { register("popack", runPopAck) }

type popResponse struct {
	LeaseID  string `json:"leaseId"`
	Messages []struct {
		ID            string `json:"id"`
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
	} `json:"messages"`
}

type ackItem struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
}

// runPopAck pre-fills the queue with N messages over P partitions (not
// measured), then C consumers pop batches of B and acknowledge each batch
// with one ack/batch, until N distinct messages are consumed. It verifies
// that exactly N distinct messages came back, none twice.
func runPopAck(ctx context.Context, e *Env, res *Result) error {
	if !e.Prefilled {
		if err := e.fill(ctx, false); err != nil {
			return fmt.Errorf("pre-fill: %w", err)
		}
	}
	path := "/api/v1/pop/queue/" + url.PathEscape(e.Queue) + "?wait=true&timeout=1000&batch=" + fmt.Sprint(e.B)
	var mu sync.Mutex
	seen := make(map[string]int, e.N)
	var distinct atomic.Int64
	dups := 0
	// The run ends when the last message is acknowledged: consumers parked
	// in a long-poll on the then empty queue are cancelled, not waited for.
	cctx, done := context.WithCancel(ctx)
	defer done()
	var end time.Time
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, e.C)
	for c := 0; c < e.C; c++ {
		wg.Go(func() {
			idle := 0
			for distinct.Load() < int64(e.N) && cctx.Err() == nil {
				status, body, err := e.Do(cctx, "GET", path, nil, true)
				if cctx.Err() != nil {
					return
				}
				if err != nil {
					errc <- err
					return
				}
				if status == 204 {
					if idle++; idle > 5 {
						return // nothing left for this consumer
					}
					continue
				}
				idle = 0
				var p popResponse
				if err := json.Unmarshal(body, &p); err != nil {
					errc <- fmt.Errorf("pop answer: %w", err)
					return
				}
				acks := make([]ackItem, len(p.Messages))
				fresh := 0
				mu.Lock()
				for i, m := range p.Messages {
					acks[i] = ackItem{m.TransactionID, m.PartitionID, p.LeaseID}
					if seen[m.ID]++; seen[m.ID] == 1 {
						fresh++
					} else {
						dups++
					}
				}
				mu.Unlock()
				buf, _ := json.Marshal(map[string]any{"acknowledgments": acks})
				if _, _, err := e.Do(cctx, "POST", "/api/v1/ack/batch", buf, true); err != nil {
					errc <- err
					return
				}
				if distinct.Add(int64(fresh)) >= int64(e.N) {
					mu.Lock()
					if end.IsZero() {
						end = time.Now()
					}
					mu.Unlock()
					done()
				}
			}
		})
	}
	wg.Wait()
	if end.IsZero() {
		end = time.Now()
	}
	res.Seconds = end.Sub(start).Seconds()
	close(errc)
	ok := int(distinct.Load()) == e.N && dups == 0
	res.Verified = &ok
	res.Verification = fmt.Sprintf("%d distinct of %d, %d delivered twice", distinct.Load(), e.N, dups)
	if err := <-errc; err != nil {
		return err
	}
	return ctx.Err()
}
