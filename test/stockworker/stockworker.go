package stockworker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Worker is a streams worker written the way the stock Queen streams SDKs
// write theirs (Runner.js of Queen's JS client, _loop, _flushTick and
// _flushPartition; the Go SDK's runtime.Runner), with the habits that make
// the idle-flush race possible:
//
//   - the idle flush runs on a timer of its own, every Idle, beside the
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
// message's createdAt), per event key (none by default: one window a
// partition at a time); the watermark is the largest event time a partition
// has folded, and a window closes when the watermark passes its end by
// the grace, or when the flush finds it ripe by the wall clock (its end
// plus the grace past) on a partition that has been idle for Idle. Each
// window also lists its events' ids, so that a verdict can tell an event
// counted twice from one lost.
//
// test/flushrace runs it against the idle-flush races; regent-bench runs it
// beside Regent's own worker, as the loop a stock worker pays for.
type Worker struct {
	Base, Token   string
	Query, Source string
	Sink          string
	Size, Idle    time.Duration
	// Grace is how long after its end a window still takes events, the
	// stock SDKs' allowed lateness: a message is stamped when the broker
	// receives it, and visible only when its push commits, which on a
	// loaded machine is a while later (over 140 ms was seen while four
	// builds ran beside the tests, over 300 ms at a load of 25 on two
	// cores, which split one window in 800 runs with a grace of 250 ms).
	// An event later than that is late, and no broker rule can tell it from
	// a quiet partition.
	Grace   time.Duration
	Batch   int
	Folders int
	// SlowFlush, when set, holds each flush between its state read and its
	// cycle for up to this long, as a loaded machine or a GC pause does.
	SlowFlush time.Duration
	// FoldLag, when set, holds each fold loop before its pop for up to this
	// long, as a stock loop busy with the other partitions of its last pop
	// does: an event then waits in the source past its window's ripeness.
	FoldLag time.Duration
	// Fresh sends if_updated_at on every state op of a row the worker read,
	// as Regent's own worker does; the stock workers do not.
	Fresh bool
	// Touched makes a fold write only the windows its batch added to (and
	// those it closes), as the SDKs do with keyed state; without it every
	// open window of the partition is written again, which the flush races
	// rely on.
	Touched bool

	queryID string
	group   string
	folded  atomic.Int64
	flushes atomic.Int64

	mu    sync.Mutex
	name  map[string]string // source partition id -> its name, for the partitions folded
	errs  []error
	trace []string // the cycles, for a failed run's report
}

// WatermarkKey is the state key of a partition's watermark.
const WatermarkKey = "wm"

// Window is a window's state, and what the sink receives when it closes.
type Window struct {
	Key         string  `json:"key,omitempty"`
	WindowStart int64   `json:"windowStart"`
	WindowEnd   int64   `json:"windowEnd"`
	Count       int     `json:"count"`
	Sum         float64 `json:"sum"`
	IDs         []int   `json:"ids"`
}

// StateRow is a row of state/get's answer.
type StateRow struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt string          `json:"updated_at"`
}

// Event is a source message's payload.
type Event struct {
	ID     int     `json:"id"`
	Key    string  `json:"key,omitempty"`
	Amount float64 `json:"amount"`
}

type popped struct {
	PartitionID string `json:"partitionId"`
	Partition   string `json:"partition"`
	LeaseID     string `json:"leaseId"`
	Messages    []struct {
		TransactionID string    `json:"transactionId"`
		CreatedAt     time.Time `json:"createdAt"`
		Data          Event     `json:"data"`
	} `json:"messages"`
}

func (s *Worker) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

// Register registers the query, whose id the worker's calls then carry.
func (s *Worker) Register(ctx context.Context) error {
	var out struct {
		QueryID string `json:"query_id"`
	}
	st, err := s.Call(ctx, "POST", "/streams/v1/queries", map[string]any{
		"name": s.Query, "source_queue": s.Source, "sink_queue": s.Sink, "config_hash": "tumb-count-sum"}, &out)
	if err != nil || st != http.StatusOK {
		return fmt.Errorf("register %s: status %d: %v", s.Query, st, err)
	}
	s.queryID, s.group = out.QueryID, "streams."+s.Query
	s.name = map[string]string{}
	return nil
}

// Run folds and flushes until ctx ends. An error is recorded and the
// worker goes on, as the stock runners do.
func (s *Worker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.Folders {
		wg.Go(func() {
			for ctx.Err() == nil {
				if s.FoldLag > 0 {
					time.Sleep(rand.N(s.FoldLag))
				}
				if err := s.Fold(ctx); err != nil && ctx.Err() == nil {
					s.fail(err)
				}
			}
		})
	}
	wg.Go(func() {
		tick := time.NewTicker(s.Idle)
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
				if err := s.Flush(ctx, p); err != nil && ctx.Err() == nil {
					s.fail(err)
				}
			}
			s.flushes.Add(1)
		}
	})
	wg.Wait()
}

// Fold pops one batch, folds it into the state it reads and commits it
// with one cycle.
func (s *Worker) Fold(ctx context.Context) error {
	q := url.Values{"batch": {strconv.Itoa(s.Batch)}, "wait": {"true"}, "timeout": {"100"}, "consumerGroup": {s.group}}
	var b popped
	st, err := s.Call(ctx, "GET", "/api/v1/pop/queue/"+url.PathEscape(s.Source)+"?"+q.Encode(), nil, &b)
	if err != nil || st == http.StatusNoContent {
		return err
	}
	if st != http.StatusOK {
		return fmt.Errorf("pop: status %d", st)
	}
	s.mu.Lock()
	s.name[b.PartitionID] = b.Partition
	s.mu.Unlock()
	size, grace := s.Size.Milliseconds(), s.Grace.Milliseconds()
	var keys []string // with Touched, the batch's windows and the watermark
	if s.Touched {
		seen := map[string]bool{WatermarkKey: true}
		keys = append(keys, WatermarkKey)
		for _, m := range b.Messages {
			ts := m.CreatedAt.UnixMilli()
			if k := windowKey(m.Data.Key, ts-ts%size); !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	rows, err := s.state(ctx, b.PartitionID, nil, keys)
	if err != nil {
		return err
	}
	open := map[string]*Window{}
	read := map[string]string{} // key -> updated_at
	var wm int64
	for _, r := range rows {
		read[r.Key] = r.UpdatedAt
		if r.Key == WatermarkKey {
			if err := json.Unmarshal(r.Value, &wm); err != nil {
				return err
			}
			continue
		}
		var w Window
		if err := json.Unmarshal(r.Value, &w); err != nil {
			return err
		}
		open[windowKey(w.Key, w.WindowStart)] = &w
	}
	for _, m := range b.Messages {
		ts := m.CreatedAt.UnixMilli()
		start := ts - ts%size
		if start+size+grace <= wm {
			continue // late: its window closed already
		}
		key := windowKey(m.Data.Key, start)
		w := open[key]
		if w == nil {
			w = &Window{Key: m.Data.Key, WindowStart: start, WindowEnd: start + size}
			open[key] = w
		}
		w.Count++
		w.Sum += m.Data.Amount
		w.IDs = append(w.IDs, m.Data.ID)
		wm = max(wm, ts)
	}
	var ops []map[string]any
	var emits []map[string]any
	for _, w := range sorted(open) {
		key := windowKey(w.Key, w.WindowStart)
		if w.WindowEnd+grace <= wm {
			emits = append(emits, map[string]any{"queue": s.Sink, "partition": b.Partition, "payload": w})
			ops = append(ops, s.op("delete", key, nil, read))
		} else {
			ops = append(ops, s.op("upsert", key, w, read))
		}
	}
	ops = append(ops, s.op("upsert", WatermarkKey, wm, read))
	last := b.Messages[len(b.Messages)-1]
	if err := s.cycle(ctx, b.PartitionID, ops, emits, map[string]any{
		"leaseId": b.LeaseID, "transactionId": last.TransactionID, "status": "completed", "count": len(b.Messages)}); err != nil {
		return err
	}
	s.folded.Add(int64(len(b.Messages)))
	return nil
}

// Flush emits and deletes the windows of partition p that are ripe by the
// wall clock.
func (s *Worker) Flush(ctx context.Context, p string) error {
	rows, err := s.Ripe(ctx, p)
	if err != nil || len(rows) == 0 {
		return err
	}
	if s.SlowFlush > 0 {
		time.Sleep(rand.N(s.SlowFlush))
	}
	return s.Emit(ctx, p, rows)
}

// Ripe reads the windows of partition p that are ripe by the wall clock.
func (s *Worker) Ripe(ctx context.Context, p string) ([]StateRow, error) {
	ripe := time.Now().Add(-s.Grace).UnixMilli()
	return s.state(ctx, p, &ripe, nil)
}

// Emit commits an idle flush that emits the windows rows, as read, and
// deletes them.
func (s *Worker) Emit(ctx context.Context, p string, rows []StateRow) error {
	read := map[string]string{}
	var ops, emits []map[string]any
	for _, r := range rows {
		read[r.Key] = r.UpdatedAt
		var w Window
		if err := json.Unmarshal(r.Value, &w); err != nil {
			return err
		}
		emits = append(emits, map[string]any{"queue": s.Sink, "partition": "", "payload": &w})
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

func (s *Worker) op(typ, key string, value any, read map[string]string) map[string]any {
	op := map[string]any{"type": typ, "key": key}
	if typ == "upsert" {
		op["value"] = value
	}
	if at, ok := read[key]; ok && s.Fresh {
		op["if_updated_at"] = at
	}
	return op
}

// windowKey is the state key of key's window starting at start; without a
// key, one window a partition at a time.
func windowKey(key string, start int64) string {
	if key == "" {
		return "tumb\x1f" + strconv.FormatInt(start, 10)
	}
	return "tumb\x1f" + key + "\x1f" + strconv.FormatInt(start, 10)
}

func sorted(m map[string]*Window) []*Window {
	out := make([]*Window, 0, len(m))
	for _, w := range m {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].WindowStart != out[j].WindowStart {
			return out[i].WindowStart < out[j].WindowStart
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Folded is how many events the worker's folds have committed.
func (s *Worker) Folded() int64 { return s.folded.Load() }

// Flushes is how many idle flushes Run has completed, each over every
// partition the worker folded: once it has moved on, a flush that read the
// state before has ended.
func (s *Worker) Flushes() int64 { return s.flushes.Load() }

// Errs are the errors the worker recorded and went on from.
func (s *Worker) Errs() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs)
}

// Trace is the worker's cycles so far, one line each, for a failed run's
// report.
func (s *Worker) Trace() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.trace)
}

// Partitions are the ids of the source partitions the worker has folded.
func (s *Worker) Partitions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.name))
}
