package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"sync/atomic"

	"github.com/regent-mq/regent/api/v1alpha1"
)

func init() { register("cycle", runCycle) }

// stateOps is S, the state upserts of every cycle.
const stateOps = 4

// runCycle pre-fills the source with N messages over P partitions (not
// measured), registers a query on it and warms its sink (warmSink). Then C workers pop batches of B
// and commit each with one /streams/v1/cycle: S state upserts, one sink
// item carrying the batch's message count, and the ack. Only the cycles are
// timed, and the run ends with the last one (see consume). Afterwards it
// verifies exactly-once: the sink's counts sum to N.
func runCycle(ctx context.Context, e *Env, res *Result) error {
	if !e.Prefilled {
		if err := e.prefill(ctx); err != nil {
			return err
		}
	}
	name, sink := e.Queue+".q", e.Queue+".sink"
	e.made = append(e.made, sink)
	queryID, err := e.register(ctx, name, e.Queue, sink)
	if err != nil {
		return err
	}
	if err := e.warmSink(ctx, sink); err != nil {
		return err
	}
	group := v1alpha1.ConsumerGroup(name)
	popPath := "/api/v1/pop/queue/" + url.PathEscape(e.Queue) + "?wait=true&timeout=1000&batch=" + fmt.Sprint(e.B) +
		"&consumerGroup=" + url.QueryEscape(group)

	var cycles atomic.Int64
	m := e.begin()
	end, _, err := e.consume(ctx, popPath, false, int64(e.N),
		func(ctx context.Context, c *consumer) (int64, error) {
			c.out = cycleBody(c.out[:0], queryID, group, sink, &c.pop)
			var err error
			if _, c.answer, err = e.DoInto(ctx, c.answer, "POST", "/streams/v1/cycle", c.out, true); err != nil {
				return 0, err
			}
			if ok, err := succeeded(c.answer); err != nil || !ok {
				return 0, fmt.Errorf("cycle refused: %s", c.answer)
			}
			cycles.Add(1)
			return int64(len(c.pop.Messages)), nil
		})
	e.measured(res, m, end)
	res.CyclesPerSec = float64(cycles.Load()) / res.Seconds
	if err != nil {
		return err
	}
	sum, emits, err := e.drainCounts(ctx, sink)
	if err != nil {
		return fmt.Errorf("read the sink: %w", err)
	}
	emits -= int64(e.P) // the warm-ups
	ok := sum == int64(e.N) && emits == cycles.Load()
	res.Verified = &ok
	res.Verification = fmt.Sprintf("sink counts sum to %d of %d, over %d emits for %d cycles", sum, e.N, emits, cycles.Load())
	return ctx.Err()
}

// warmSink puts a message of count 0 in each of the sink's P partitions
// before the clock starts, so that the cycles measure a query that has run
// before, whose sink partitions exist: with N = P * B (the partition sweep)
// every cycle would otherwise also create its sink partition.
func (e *Env) warmSink(ctx context.Context, sink string) error {
	const per = 1000 // partitions a request
	for from := 0; from < e.P; from += per {
		var b []byte
		b = append(b, `{"items":[`...)
		for i := from; i < min(from+per, e.P); i++ {
			if i > from {
				b = append(b, ',')
			}
			b = append(b, `{"queue":`...)
			b = appendJSONString(b, sink)
			b = append(b, `,"partition":`...)
			b = appendJSONString(b, partition(i))
			b = append(b, `,"payload":{"count":0}}`...)
		}
		b = append(b, "]}"...)
		status, body, err := e.Do(ctx, "POST", "/api/v1/push", b, false)
		if err != nil {
			return fmt.Errorf("warm the sink: %w", err)
		}
		if status != 201 {
			return fmt.Errorf("warm the sink: %d %s", status, body)
		}
	}
	return nil
}

// cycleBody appends the cycle committing the batch of a: stateOps upserts,
// one sink item carrying the batch's message count, and the ack.
func cycleBody(b []byte, queryID, group, sink string, a *popAnswer) []byte {
	n := len(a.Messages)
	b = append(b, `{"query_id":`...)
	b = appendJSONString(b, queryID)
	b = append(b, `,"partition_id":`...)
	b = appendJSONString(b, a.PartitionID)
	b = append(b, `,"consumer_group":`...)
	b = appendJSONString(b, group)
	b = append(b, `,"state_ops":[`...)
	for i := range stateOps {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"upsert","key":"k`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","value":{"acc":`...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, `}}`...)
	}
	b = append(b, `],"push_items":[{"queue":`...)
	b = appendJSONString(b, sink)
	b = append(b, `,"partition":`...)
	b = appendJSONString(b, a.Partition)
	b = append(b, `,"payload":{"count":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, `}}],"ack":{"leaseId":`...)
	b = appendJSONString(b, a.LeaseID)
	b = append(b, `,"status":"completed","count":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, "}}"...)
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
// payloads' "count". One empty answer does not mean an empty queue: a pop
// without wait answers 204 when the partitions it tried had nothing, and
// with thousands of partitions those can all be ones just drained; three in
// a row do.
func (e *Env) drainCounts(ctx context.Context, queue string) (sum, messages int64, err error) {
	path := "/api/v1/pop/queue/" + url.PathEscape(queue) + "?batch=1000&autoAck=true&partitions=" + fmt.Sprint(min(e.P, 100))
	for empty := 0; ; {
		status, body, err := e.Do(ctx, "GET", path, nil, false)
		if err != nil {
			return 0, 0, err
		}
		if status == 204 {
			if empty++; empty == 3 {
				return sum, messages, nil
			}
			continue
		}
		empty = 0
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
