package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

func init() { register("stateget", runStateGet) }

// stateRows is the size of the shard read: the open windows of a busy
// partition, half of them under the prefix that is read.
const stateRows = 64

// runStateGet writes a shard of stateRows rows for one query and partition
// (with one idle-flush cycle, not measured), then C clients send N state
// reads, alternately for all keys and for a key prefix that selects half of
// them. It reports the latency of each kind, and verifies that every read
// returned the rows it should: the first answer of each kind is decoded and
// checked, and since nothing writes the shard during the reads, every later
// answer must be byte for byte the same (decoding them all took a third of
// the machine's CPU from the broker under test).
func runStateGet(ctx context.Context, e *Env, res *Result) error {
	queryID, partitionID, err := e.stateShard(ctx)
	if err != nil {
		return err
	}
	kinds := []struct {
		name  string
		body  []byte
		rows  int
		first []byte
	}{
		{"all keys", encode(map[string]any{"query_id": queryID, "partition_id": partitionID}), stateRows, nil},
		{"prefix", encode(map[string]any{"query_id": queryID, "partition_id": partitionID, "key_prefix": "tumb:60\u001f"}), stateRows / 2, nil},
	}
	for k := range kinds {
		_, body, err := e.Do(ctx, "POST", "/streams/v1/state/get", kinds[k].body, false)
		if err != nil {
			return err
		}
		if err := checkRows(body, kinds[k].rows); err != nil {
			return fmt.Errorf("%s: %w", kinds[k].name, err)
		}
		kinds[k].first = body
	}
	lat := make([][]time.Duration, len(kinds))
	var mu sync.Mutex
	var next, wrong atomic.Int64
	m := e.begin()
	var wg sync.WaitGroup
	errc := make(chan error, e.C)
	for range e.C {
		wg.Go(func() {
			var body []byte
			for {
				i := int(next.Add(1)) - 1
				if i >= e.N || ctx.Err() != nil {
					return
				}
				k := i % len(kinds)
				t0 := time.Now()
				var err error
				_, body, err = e.DoInto(ctx, body, "POST", "/streams/v1/state/get", kinds[k].body, true)
				took := time.Since(t0)
				if err != nil {
					errc <- err
					return
				}
				if !bytes.Equal(body, kinds[k].first) {
					wrong.Add(1)
				}
				mu.Lock()
				lat[k] = append(lat[k], took)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	e.measured(res, m, time.Now())
	close(errc)
	ok := wrong.Load() == 0
	res.Verified = &ok
	res.Verification = fmt.Sprintf("%d reads with the wrong rows", wrong.Load())
	for k, l := range lat {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		res.Verification += fmt.Sprintf("; %s (%d rows): p50 %.3f ms, p99 %.3f ms", kinds[k].name, kinds[k].rows, percentile(l, .5), percentile(l, .99))
	}
	if err := <-errc; err != nil {
		return err
	}
	return ctx.Err()
}

// checkRows checks a state answer: n rows, in key order.
func checkRows(body []byte, n int) error {
	var a struct {
		Rows []struct {
			Key string `json:"key"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("state answer: %w", err)
	}
	if len(a.Rows) != n {
		return fmt.Errorf("state answer has %d rows, want %d", len(a.Rows), n)
	}
	for i := 1; i < n; i++ {
		if a.Rows[i-1].Key >= a.Rows[i].Key {
			return fmt.Errorf("state answer rows out of key order at %d", i)
		}
	}
	return nil
}

// stateShard registers a query on the queue, creates its partition and
// fills the partition's state with one idle-flush cycle.
func (e *Env) stateShard(ctx context.Context) (queryID, partitionID string, err error) {
	if queryID, err = e.register(ctx, e.Queue+".q", e.Queue, ""); err != nil {
		return "", "", err
	}
	_, body, err := e.Do(ctx, "POST", "/api/v1/configure", encode(map[string]any{"queue": e.Queue}), false)
	if err != nil {
		return "", "", fmt.Errorf("configure: %w", err)
	}
	var c struct {
		PartitionID string `json:"partitionId"`
	}
	if err := json.Unmarshal(body, &c); err != nil || c.PartitionID == "" {
		return "", "", fmt.Errorf("configure answered %s", body)
	}
	ops := make([]map[string]any, stateRows)
	for i := range ops {
		key := fmt.Sprintf("tumb:60\u001f2026-08-17T10:%02d:00.000Z\u001fkey%d", i%60, i)
		if i%2 == 1 {
			key = fmt.Sprintf("sess:30\u001f%d", i)
		}
		ops[i] = map[string]any{"type": "upsert", "key": key,
			"value": map[string]any{"windowEnd": 1787047260000 + i*60000, "acc": i, "key": fmt.Sprint("key", i)}}
	}
	_, body, err = e.Do(ctx, "POST", "/streams/v1/cycle", encode(map[string]any{
		"query_id": queryID, "partition_id": c.PartitionID, "state_ops": ops, "ack": nil}), false)
	if err != nil {
		return "", "", fmt.Errorf("write the shard: %w", err)
	}
	var a struct {
		Success bool `json:"success"`
	}
	if json.Unmarshal(body, &a) != nil || !a.Success {
		return "", "", fmt.Errorf("write the shard: %s", body)
	}
	return queryID, c.PartitionID, nil
}

// encode marshals a request body. Only maps of strings, numbers and such
// maps are encoded here, which cannot fail.
func encode(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
