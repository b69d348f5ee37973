package flushrace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stock is a streams worker written the way the stock Queen streams SDKs
// write theirs (Runner.js of Queen's JS client, _loop, _flushTick and
// _flushPartition; the Go SDK's runtime.Runner), with the habits that make
// the idle-flush race possible:
//
//   - the idle flush runs on a timer of its own, every idle, beside the
//     pop-and-fold loops, and nothing in the process serialises a flush and
//     a fold of the same partition; one flush runs at a time, and it visits
//     every partition the worker folded, idle or not;
//   - a flush keeps no memory: at every tick it reads the ripe windows
//     again (state/get with ripe_at_or_before), emits them and deletes
//     them, with no if_updated_at;
//   - several partitions are folded at once, each by its own pop;
//   - emits carry no transactionId, so the sink's dedup cannot catch a
//     window emitted twice;
//   - every cycle answered success false is an error (the JS client throws
//     it, and the runner counts it in errorsTotal), and the worker goes on.
//
// It counts and sums events in tumbling windows of event time (the
// message's createdAt); the watermark is the largest event time a partition
// has folded, and a window closes when the watermark passes its end by
// the grace, or when the flush finds it ripe by the wall clock (its end
// plus the grace past) on a partition that has been idle for idle. Each window also lists its events' ids, so that a
// verdict can tell an event counted twice from one lost.
type stock struct {
	base, token   string
	query, source string
	sink          string
	size, idle    time.Duration
	// grace is how long after its end a window still takes events, the
	// stock SDKs' allowed lateness: a message is stamped when the broker
	// receives it, and visible only when its push commits, which on a
	// loaded machine is a while later (over 140 ms was seen while four
	// builds ran beside the tests, over 300 ms at a load of 25 on two
	// cores, which split one window in 800 runs with a grace of 250 ms).
	// An event later than that is late, and no broker rule can tell it from
	// a quiet partition.
	grace   time.Duration
	batch   int
	folders int
	// slowFlush, when set, holds each flush between its state read and its
	// cycle for up to this long, as a loaded machine or a GC pause does.
	slowFlush time.Duration
	// foldLag, when set, holds each fold loop before its pop for up to this
	// long, as a stock loop busy with the other partitions of its last pop
	// does: an event then waits in the source past its window's ripeness.
	foldLag time.Duration
	// fresh sends if_updated_at on every state op of a row the worker read,
	// as Regent's own worker does; the stock workers do not.
	fresh bool

	queryID string
	group   string

	mu    sync.Mutex
	name  map[string]string // source partition id -> its name, for the partitions folded
	errs  []error
	trace []string // the cycles, for a failed run's report
}

const watermarkKey = "wm"

type window struct {
	WindowStart int64   `json:"windowStart"`
	WindowEnd   int64   `json:"windowEnd"`
	Count       int     `json:"count"`
	Sum         float64 `json:"sum"`
	IDs         []int   `json:"ids"`
}

type stateRow struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt string          `json:"updated_at"`
}

type event struct {
	ID     int     `json:"id"`
	Amount float64 `json:"amount"`
}

type popped struct {
	PartitionID string `json:"partitionId"`
	Partition   string `json:"partition"`
	LeaseID     string `json:"leaseId"`
	Messages    []struct {
		TransactionID string    `json:"transactionId"`
		CreatedAt     time.Time `json:"createdAt"`
		Data          event     `json:"data"`
	} `json:"messages"`
}

// call sends a request until it is answered below 500, as the stock
// clients do: a 503 while the machine is loaded, or a connection lost, is
// retried, and the broker's one-transaction cycle makes that safe.
func (s *stock) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var buf []byte
	if body != nil {
		var err error
		if buf, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	for {
		status, err := s.send(ctx, method, path, buf, out)
		if err == nil && status < 500 || ctx.Err() != nil {
			return status, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *stock) send(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, nil
}

func (s *stock) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *stock) register(ctx context.Context) error {
	var out struct {
		QueryID string `json:"query_id"`
	}
	st, err := s.call(ctx, "POST", "/streams/v1/queries", map[string]any{
		"name": s.query, "source_queue": s.source, "sink_queue": s.sink, "config_hash": "tumb-count-sum"}, &out)
	if err != nil || st != http.StatusOK {
		return fmt.Errorf("register %s: status %d: %v", s.query, st, err)
	}
	s.queryID, s.group = out.QueryID, "streams."+s.query
	s.name = map[string]string{}
	return nil
}

// run folds and flushes until ctx ends. An error is recorded and the
// worker goes on, as the stock runners do.
func (s *stock) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.folders {
		wg.Go(func() {
			for ctx.Err() == nil {
				if s.foldLag > 0 {
					time.Sleep(rand.N(s.foldLag))
				}
				if err := s.fold(ctx); err != nil && ctx.Err() == nil {
					s.fail(err)
				}
			}
		})
	}
	wg.Go(func() {
		tick := time.NewTicker(s.idle)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			s.mu.Lock()
			partitions := make([]string, 0, len(s.name))
			for p := range s.name {
				partitions = append(partitions, p)
			}
			s.mu.Unlock()
			for _, p := range partitions {
				if err := s.flush(ctx, p); err != nil && ctx.Err() == nil {
					s.fail(err)
				}
			}
		}
	})
	wg.Wait()
}

func (s *stock) fold(ctx context.Context) error {
	q := url.Values{"batch": {strconv.Itoa(s.batch)}, "wait": {"true"}, "timeout": {"100"}, "consumerGroup": {s.group}}
	var b popped
	st, err := s.call(ctx, "GET", "/api/v1/pop/queue/"+url.PathEscape(s.source)+"?"+q.Encode(), nil, &b)
	if err != nil || st == http.StatusNoContent {
		return err
	}
	if st != http.StatusOK {
		return fmt.Errorf("pop: status %d", st)
	}
	s.mu.Lock()
	s.name[b.PartitionID] = b.Partition
	s.mu.Unlock()
	rows, err := s.state(ctx, b.PartitionID, nil)
	if err != nil {
		return err
	}
	open := map[int64]*window{}
	read := map[string]string{} // key -> updated_at
	var wm int64
	for _, r := range rows {
		read[r.Key] = r.UpdatedAt
		if r.Key == watermarkKey {
			if err := json.Unmarshal(r.Value, &wm); err != nil {
				return err
			}
			continue
		}
		var w window
		if err := json.Unmarshal(r.Value, &w); err != nil {
			return err
		}
		open[w.WindowStart] = &w
	}
	size, grace := s.size.Milliseconds(), s.grace.Milliseconds()
	for _, m := range b.Messages {
		ts := m.CreatedAt.UnixMilli()
		start := ts - ts%size
		if start+size+grace <= wm {
			continue // late: its window closed already
		}
		w := open[start]
		if w == nil {
			w = &window{WindowStart: start, WindowEnd: start + size}
			open[start] = w
		}
		w.Count++
		w.Sum += m.Data.Amount
		w.IDs = append(w.IDs, m.Data.ID)
		wm = max(wm, ts)
	}
	var ops []map[string]any
	var emits []map[string]any
	for _, w := range sorted(open) {
		key := windowKey(w.WindowStart)
		if w.WindowEnd+grace <= wm {
			emits = append(emits, map[string]any{"queue": s.sink, "partition": b.Partition, "payload": w})
			ops = append(ops, s.op("delete", key, nil, read))
		} else {
			ops = append(ops, s.op("upsert", key, w, read))
		}
	}
	ops = append(ops, s.op("upsert", watermarkKey, wm, read))
	last := b.Messages[len(b.Messages)-1]
	return s.cycle(ctx, b.PartitionID, ops, emits, map[string]any{
		"leaseId": b.LeaseID, "transactionId": last.TransactionID, "status": "completed", "count": len(b.Messages)})
}

// flush emits and deletes the windows of partition p that are ripe by the
// wall clock.
func (s *stock) flush(ctx context.Context, p string) error {
	rows, err := s.ripe(ctx, p)
	if err != nil || len(rows) == 0 {
		return err
	}
	if s.slowFlush > 0 {
		time.Sleep(rand.N(s.slowFlush))
	}
	return s.emit(ctx, p, rows)
}

// ripe reads the windows of partition p that are ripe by the wall clock.
func (s *stock) ripe(ctx context.Context, p string) ([]stateRow, error) {
	ripe := time.Now().Add(-s.grace).UnixMilli()
	return s.state(ctx, p, &ripe)
}

// emit commits an idle flush that emits the windows rows, as read, and
// deletes them.
func (s *stock) emit(ctx context.Context, p string, rows []stateRow) error {
	read := map[string]string{}
	var ops, emits []map[string]any
	for _, r := range rows {
		read[r.Key] = r.UpdatedAt
		var w window
		if err := json.Unmarshal(r.Value, &w); err != nil {
			return err
		}
		emits = append(emits, map[string]any{"queue": s.sink, "partition": "", "payload": &w})
		ops = append(ops, s.op("delete", r.Key, nil, read))
	}
	s.mu.Lock()
	partition := s.name[p]
	s.mu.Unlock()
	for _, e := range emits {
		e["partition"] = partition
	}
	return s.cycle(ctx, p, ops, emits, nil)
}

func (s *stock) op(typ, key string, value any, read map[string]string) map[string]any {
	op := map[string]any{"type": typ, "key": key}
	if typ == "upsert" {
		op["value"] = value
	}
	if at, ok := read[key]; ok && s.fresh {
		op["if_updated_at"] = at
	}
	return op
}

func (s *stock) state(ctx context.Context, partition string, ripe *int64) ([]stateRow, error) {
	req := map[string]any{"query_id": s.queryID, "partition_id": partition}
	if ripe != nil {
		req["ripe_at_or_before"] = *ripe
	}
	var out struct {
		Rows []stateRow `json:"rows"`
	}
	st, err := s.call(ctx, "POST", "/streams/v1/state/get", req, &out)
	if err != nil {
		return nil, err
	}
	if st != http.StatusOK {
		return nil, fmt.Errorf("state/get: status %d", st)
	}
	return out.Rows, nil
}

// cycle commits. A refusal (success false) is an error, as for the stock
// runners; a worker that sends if_updated_at (fresh) asked to be refused,
// and goes on as Regent's own does.
func (s *stock) cycle(ctx context.Context, p string, ops, emits []map[string]any, ack map[string]any) error {
	if ops == nil {
		ops = []map[string]any{}
	}
	if emits == nil {
		emits = []map[string]any{}
	}
	var out struct {
		Success  bool   `json:"success"`
		Error    string `json:"error"`
		Deferred string `json:"deferred"`
	}
	defer func() {
		// What a failed run prints: each cycle's time, partition, kind,
		// the windows it emitted and its verdict.
		var ws []int64
		for _, e := range emits {
			ws = append(ws, e["payload"].(*window).WindowStart)
		}
		s.mu.Lock()
		s.trace = append(s.trace, fmt.Sprintf("  %s %s %s emits %v: success %v %s%s",
			time.Now().Format("15:04:05.000"), s.name[p], kind(ack), ws, out.Success, out.Error, out.Deferred))
		s.mu.Unlock()
	}()
	st, err := s.call(ctx, "POST", "/streams/v1/cycle", map[string]any{
		"query_id": s.queryID, "partition_id": p, "consumer_group": s.group,
		"state_ops": ops, "push_items": emits, "ack": ack}, &out)
	switch {
	case err != nil:
		return err
	case st != http.StatusOK:
		return fmt.Errorf("cycle: status %d", st)
	case !out.Success && !s.fresh:
		return fmt.Errorf("%s failed: %s", kind(ack), out.Error)
	case out.Deferred != "":
		deferrals.Add(1)
		if strings.Contains(out.Deferred, "changed since a ripe read") {
			raced.Add(1)
		}
	}
	return nil
}

// deferrals counts the flushes the broker deferred, and raced those it
// deferred for a fold that changed a window after the flush read it.
var deferrals, raced atomic.Int64

func kind(ack map[string]any) string {
	if ack != nil {
		return "fold"
	}
	return "flush"
}

func windowKey(start int64) string { return "tumb\x1f" + strconv.FormatInt(start, 10) }

func sorted(m map[int64]*window) []*window {
	out := make([]*window, 0, len(m))
	for _, w := range m {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].WindowStart < out[j].WindowStart })
	return out
}
