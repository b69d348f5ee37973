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

func init() { register("cycle", runCycle) }

// stateOps is S, the state upserts of every cycle.
const stateOps = 4

// runCycle pre-fills the source with N messages over P partitions (not
// measured) and registers a query on it. Then C workers pop batches of B
// and commit each with one /streams/v1/cycle: S state upserts, one sink
// item carrying the batch's message count, and the ack. Only the cycles are
// timed. Afterwards it verifies exactly-once: the sink's counts sum to N.
func runCycle(ctx context.Context, e *Env, res *Result) error {
	if err := e.fill(ctx, false); err != nil {
		return fmt.Errorf("pre-fill: %w", err)
	}
	name, sink := e.Queue+".q", e.Queue+".sink"
	queryID, err := e.register(ctx, name, e.Queue, sink)
	if err != nil {
		return err
	}
	group := "streams." + name
	popPath := "/api/v1/pop/queue/" + url.PathEscape(e.Queue) + "?wait=true&timeout=1000&batch=" + fmt.Sprint(e.B) +
		"&consumerGroup=" + url.QueryEscape(group)

	var acked, cycles atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, e.C)
	for range e.C {
		wg.Go(func() {
			idle := 0
			for acked.Load() < int64(e.N) && ctx.Err() == nil {
				status, body, err := e.Do(ctx, "GET", popPath, nil, false)
				if err != nil {
					errc <- err
					return
				}
				if status == 204 {
					if idle++; idle > 5 {
						return
					}
					continue
				}
				idle = 0
				// Only the count of the messages matters here: decoding them
				// into empty structs keeps the tool's own CPU use low, since it
				// shares the machine with the broker.
				var p struct {
					PartitionID string     `json:"partitionId"`
					Partition   string     `json:"partition"`
					LeaseID     string     `json:"leaseId"`
					Messages    []struct{} `json:"messages"`
				}
				if err := json.Unmarshal(body, &p); err != nil {
					errc <- fmt.Errorf("pop answer: %w", err)
					return
				}
				n := len(p.Messages)
				buf := cycleBody(queryID, p.PartitionID, group, sink, p.Partition, p.LeaseID, n)
				_, body, err = e.Do(ctx, "POST", "/streams/v1/cycle", buf, true)
				if err != nil {
					errc <- err
					return
				}
				var c struct {
					Success bool   `json:"success"`
					Error   string `json:"error"`
				}
				if err := json.Unmarshal(body, &c); err != nil || !c.Success {
					errc <- fmt.Errorf("cycle refused: %s", body)
					return
				}
				acked.Add(int64(n))
				cycles.Add(1)
			}
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.CyclesPerSec = float64(cycles.Load()) / res.Seconds
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	sum, emits, err := e.drainCounts(ctx, sink)
	if err != nil {
		return fmt.Errorf("read the sink: %w", err)
	}
	ok := sum == int64(e.N) && emits == cycles.Load()
	res.Verified = &ok
	res.Verification = fmt.Sprintf("sink counts sum to %d of %d, over %d emits for %d cycles", sum, e.N, emits, cycles.Load())
	return ctx.Err()
}

// cycleBody is the cycle committing a batch of n messages: stateOps
// upserts, one sink item carrying n, and the ack.
func cycleBody(queryID, partitionID, group, sink, partition, leaseID string, n int) []byte {
	ops := make([]map[string]any, stateOps)
	for i := range ops {
		ops[i] = map[string]any{"type": "upsert", "key": fmt.Sprintf("k%d", i), "value": map[string]any{"acc": n}}
	}
	return encode(map[string]any{
		"query_id": queryID, "partition_id": partitionID, "consumer_group": group,
		"state_ops":  ops,
		"push_items": []any{map[string]any{"queue": sink, "partition": partition, "payload": map[string]any{"count": n}}},
		"ack":        map[string]any{"leaseId": leaseID, "status": "completed", "count": n},
	})
}

// register registers a query and returns its id.
func (e *Env) register(ctx context.Context, name, source, sink string) (string, error) {
	buf, _ := json.Marshal(map[string]any{"name": name, "source_queue": source, "sink_queue": sink, "config_hash": "bench"})
	_, body, err := e.Do(ctx, "POST", "/streams/v1/queries", buf, false)
	if err != nil {
		return "", fmt.Errorf("register query: %w", err)
	}
	var r struct {
		QueryID string `json:"query_id"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.QueryID == "" {
		return "", fmt.Errorf("register query: %s", body)
	}
	return r.QueryID, nil
}

// drainCounts pops every message of queue with auto-ack and sums the
// payloads' "count".
func (e *Env) drainCounts(ctx context.Context, queue string) (sum, messages int64, err error) {
	path := "/api/v1/pop/queue/" + url.PathEscape(queue) + "?batch=1000&autoAck=true&partitions=" + fmt.Sprint(min(e.P, 100))
	for {
		status, body, err := e.Do(ctx, "GET", path, nil, false)
		if err != nil {
			return 0, 0, err
		}
		if status == 204 {
			return sum, messages, nil
		}
		var p struct {
			Messages []struct {
				Data struct {
					Count int64 `json:"count"`
				} `json:"data"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return 0, 0, err
		}
		for _, m := range p.Messages {
			sum += m.Data.Count
			messages++
		}
	}
}
