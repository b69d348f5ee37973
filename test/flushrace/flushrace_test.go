// Package flushrace_test runs streams workers whose idle flush runs beside
// their folds, as the stock Queen streams workers do (test/stockworker), in the
// scenarios where such workers were seen counting an event twice (issue 30)
// or reporting errors (issue 37), and one where a fold adds an event to a
// window a flush has read, many times each, and checks every emitted window
// against the events the source holds, and that the worker reported no
// error. REGENT_FLUSHRACE_RUNS sets the runs per scenario (make test runs a
// few; `make chaos` runs 200).
package flushrace_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/poll"
	"github.com/regent-mq/regent/test/stockworker"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// scenario is one of the issue's, scaled down in time by ten so that many
// runs fit in a test: the ratios of push period, window size and idle
// flush are the issue's.
type scenario struct {
	name       string
	partitions int
	size, idle time.Duration
	// pushes[i] is when the i-th round of single-message pushes (one to
	// each partition) is sent, after a window boundary; before is how
	// many of them are sent before the worker starts.
	pushes []time.Duration
	before int
	// folders is how many pop-and-fold loops run (4 when 0); foldLag and
	// slowFlush are the worker's (stock).
	folders            int
	foldLag, slowFlush time.Duration
}

var scenarios = []scenario{
	{ // three partitions, a push to each every 1.2 s, a 2 s window, idleFlush 1 s
		name: "three partitions pushed every period", partitions: 3, size: 200 * time.Millisecond, idle: 100 * time.Millisecond,
		pushes: every(6, 2*time.Millisecond, 120*time.Millisecond)},
	{ // one partition, eight events one at a time
		name: "one partition eight events", partitions: 1, size: 200 * time.Millisecond, idle: 50 * time.Millisecond,
		pushes: every(8, 2*time.Millisecond, 70*time.Millisecond)},
	{ // five pushes made before the worker starts, a 3 s window, idleFlush 500 ms
		name: "five pushes before the worker starts", partitions: 1, size: 300 * time.Millisecond, idle: 50 * time.Millisecond,
		pushes: every(5, 2*time.Millisecond, 3*time.Millisecond), before: 5},
	{ // a fold loop that pops late, so that a fold often adds an event to a
		// window a slow flush has read as ripe (issue 37)
		name: "a fold adds an event to a window the flush read", partitions: 1, size: 200 * time.Millisecond, idle: 20 * time.Millisecond,
		pushes: every(12, 2*time.Millisecond, 30*time.Millisecond), folders: 1, foldLag: 900 * time.Millisecond, slowFlush: 40 * time.Millisecond},
}

func every(n int, first, period time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = first + time.Duration(i)*period
	}
	return out
}

func runs() int {
	if n, err := strconv.Atoi(os.Getenv("REGENT_FLUSHRACE_RUNS")); err == nil && n > 0 {
		return n
	}
	return 12
}

// TestStockIdleFlushBesideFoldsCountsEveryEventOnceWithoutErrors is the
// defect of issue 30 and of issue 37, for stock workers, which send no
// preconditions: whatever the interleaving of a flush and the folds of its
// partition, every event is in exactly one emitted window, each window is
// emitted once, and the worker reports no error. The broker defers (as a
// success that applies nothing) the flush that would emit a window again,
// or without an event a fold added to it after the flush read it.
func TestStockIdleFlushBesideFoldsCountsEveryEventOnceWithoutErrors(t *testing.T) {
	b := shared(t)
	each(t, func(sc scenario, tag string) ([]string, error) {
		return sc.run(b, tag, false)
	})
}

// TestStockFlushOfAWindowAFoldAddedToSinceItsReadIsDeferred is the
// interleaving of issue 37 played step by step through the routes: a stock
// flush reads a ripe window, a fold adds an event to it, and the flush
// emits what it read and deletes the window. The broker defers that flush,
// as a success; the next one emits the window with both events.
func TestStockFlushOfAWindowAFoldAddedToSinceItsReadIsDeferred(t *testing.T) {
	b := shared(t)
	ctx := t.Context()
	tag := strconv.FormatInt(tags.Add(1), 10)
	s := &stockworker.Worker{Base: b.URL, Token: b.Token, Query: "q" + tag, Source: "src" + tag, Sink: "out" + tag,
		Size: 500 * time.Millisecond, Grace: 20 * time.Millisecond, Batch: 1, Folders: 1}
	if err := s.Register(ctx); err != nil {
		t.Fatal(err)
	}
	// Two events in one window, pushed in one request (which stamps its
	// messages with one time), folded one at a time.
	if err := push(ctx, s, "p0", stockworker.Event{ID: 1, Amount: 101}, stockworker.Event{ID: 2, Amount: 102}); err != nil {
		t.Fatal(err)
	}
	if err := s.Fold(ctx); err != nil {
		t.Fatal(err)
	}
	p := s.Partitions()[0]
	var read []stockworker.StateRow
	brokertest.Eventually(t, 10*time.Second, func() error { // the window is ripe by the wall clock after its end and the grace
		var err error
		if read, err = s.Ripe(ctx, p); err == nil && len(read) == 0 {
			err = errors.New("the window is not ripe yet")
		}
		return err
	})
	if err := s.Fold(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Emit(ctx, p, read); err != nil {
		t.Fatalf("the flush that read before the fold: %v", err)
	}
	if err := s.Flush(ctx, p); err != nil {
		t.Fatalf("the next flush: %v", err)
	}
	problems, report, err := verdict(ctx, b, s, s.Size.Milliseconds())
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("%s\n%s\n%s", strings.Join(problems, "\n"), strings.Join(report, "\n"), strings.Join(s.Trace(), "\n"))
	}
	if !strings.Contains(s.Trace()[2], "flush emits") || !strings.Contains(s.Trace()[2], "changed since a ripe read returned it") {
		t.Fatalf("the flush that read before the fold was not deferred:\n%s", strings.Join(s.Trace(), "\n"))
	}
}

// TestIdleFlushWithPreconditionsCountsEveryEventOnce is exactly-once for a
// worker that sends the updated_at of each row it read, as Regent's own
// does: every event is in exactly one emitted window, the window of its
// event time, and each window is emitted once.
func TestIdleFlushWithPreconditionsCountsEveryEventOnce(t *testing.T) {
	b := shared(t)
	each(t, func(sc scenario, tag string) ([]string, error) {
		return sc.run(b, tag, true)
	})
}

// shared is the package's broker, in the test's namespace, whose tenant may
// register queries; tags keep each run's queues and query apart within it.
func shared(t *testing.T) *brokertest.Broker {
	t.Helper()
	b := brokertest.Shared(t)
	b.Grant(t, b.Tenant, nil)
	return b
}

// tags keeps each run's queues and query apart.
var tags atomic.Int64

// each runs every scenario runs() times, six runs at a time, and fails the
// test with the first wrong run's report.
func each(t *testing.T, run func(sc scenario, tag string) ([]string, error)) {
	for _, sc := range scenarios {
		t.Run(strings.ReplaceAll(sc.name, " ", "_"), func(t *testing.T) {
			n := runs()
			deferred0, raced0 := stockworker.Deferrals.Load(), stockworker.Raced.Load()
			var wrong atomic.Int32
			var mu sync.Mutex
			var first []string
			sem := make(chan struct{}, 6)
			var wg sync.WaitGroup
			for range n {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					problems, err := run(sc, strconv.FormatInt(tags.Add(1), 10))
					if err != nil {
						problems = append(problems, err.Error())
					}
					if len(problems) > 0 {
						wrong.Add(1)
						mu.Lock()
						if first == nil {
							first = problems
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			t.Logf("%s: %d of %d runs wrong (a wrong window, or a worker error); %d flushes deferred, %d of them after a fold changed a window they read",
				sc.name, wrong.Load(), n, stockworker.Deferrals.Load()-deferred0, stockworker.Raced.Load()-raced0)
			if wrong.Load() > 0 {
				t.Fatalf("%d of %d runs wrong; the first:\n%s", wrong.Load(), n, strings.Join(first, "\n"))
			}
		})
	}
}

// run runs the scenario once on queues of its own. When the emitted windows
// have a problem, it returns them, then the events, the windows and the
// cycles of the run; when the worker reported an error, the first.
func (sc scenario) run(b *brokertest.Broker, tag string, fresh bool) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := &stockworker.Worker{Base: b.URL, Token: b.Token, Query: "q" + tag, Source: "src" + tag, Sink: "out" + tag,
		Size: sc.size, Idle: sc.idle, Grace: 500 * time.Millisecond, Batch: 50, Folders: cmp.Or(sc.folders, 4),
		SlowFlush: cmp.Or(sc.slowFlush, 10*time.Millisecond), FoldLag: sc.foldLag, Fresh: fresh}
	if err := s.Register(ctx); err != nil {
		return nil, err
	}
	work, stop := context.WithCancel(ctx)
	var done sync.WaitGroup
	start := func() { done.Go(func() { s.Run(work) }) }
	if sc.before == 0 {
		start()
	}

	// Real time: the scenario is a schedule of pushes on the wall clock,
	// which stamps the events and ripens the windows. The rounds are timed
	// from a window boundary, so that the pushes that race the flush of a
	// window fall just after its end, as in the issue.
	size := sc.size.Milliseconds()
	now := time.Now().UnixMilli()
	origin := time.UnixMilli(now - now%size + 2*size)
	id := 0
	for round, at := range sc.pushes {
		time.Sleep(time.Until(origin.Add(at)))
		var wg sync.WaitGroup
		errs := make(chan error, sc.partitions)
		for p := range sc.partitions {
			id++
			ev := stockworker.Event{ID: id, Amount: float64(100 + id)}
			wg.Go(func() { errs <- push(ctx, s, fmt.Sprintf("p%d", p), ev) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				stop()
				return nil, err
			}
		}
		if round+1 == sc.before {
			start()
		}
	}

	// Done once every event pushed is folded and no window is open, so
	// that none is left to turn ripe, and the flush that was running then
	// has ended: a window it read before it was emitted would be emitted
	// again in it.
	flushes := int64(-1)
	err := poll.Until(ctx, func() error {
		if n, left := s.Folded(), open(ctx, b, s.Query); n != int64(id) || left != 0 {
			flushes = -1
			return fmt.Errorf("%d of %d events folded, %d windows open", n, id, left)
		}
		if flushes < 0 {
			flushes = s.Flushes()
		}
		if s.Flushes() <= flushes {
			return errors.New("the flush under way when the last window closed has not ended")
		}
		return nil
	})
	if err != nil {
		stop()
		done.Wait()
		return slices.Concat([]string{fmt.Sprintf("not done after 30 s: %v; the worker's errors: %v", err, s.Errs())}, s.Trace()), nil
	}
	stop()
	done.Wait()
	if len(s.Errs()) > 0 {
		return nil, s.Errs()[0]
	}
	problems, report, err := verdict(ctx, b, s, size)
	if err != nil || len(problems) == 0 {
		return nil, err
	}
	return slices.Concat(problems, report, s.Trace()), nil
}

// open counts the windows the query holds in its state, or -1 while the
// database cannot say (the run then times out).
func open(ctx context.Context, b *brokertest.Broker, query string) int {
	id, _, err := b.DB.StreamQueryNamed(ctx, b.Tenant, query)
	if err != nil {
		return -1
	}
	state, err := b.DB.StateOf(ctx, id)
	if err != nil {
		return -1
	}
	n := 0
	for _, row := range state {
		if row.Key != stockworker.WatermarkKey {
			n++
		}
	}
	return n
}

// push pushes evs to a partition of the worker's source in one request.
func push(ctx context.Context, s *stockworker.Worker, partition string, evs ...stockworker.Event) error {
	items := make([]map[string]any, len(evs))
	for i, ev := range evs {
		items[i] = map[string]any{"queue": s.Source, "partition": partition, "payload": ev,
			// Stock clients stamp one on every message.
			"transactionId": fmt.Sprintf("%s-%d", s.Source, ev.ID)}
	}
	st, err := s.Call(ctx, "POST", "/api/v1/push", map[string]any{"items": items}, nil)
	if err != nil {
		return err
	}
	if st != http.StatusOK && st != http.StatusCreated {
		return fmt.Errorf("push: status %d", st)
	}
	return nil
}

// verdict checks the sink against the source: each event in exactly one
// emitted window, the one its createdAt falls in, and each window emitted
// once, with the count and sum of its events. report lists the events and
// the emitted windows. Both queues are read from the log in PostgreSQL, not
// popped: an auto-acked pop whose answer a loaded machine lost would take
// its messages from the oracle, and a run would look wrong when it was not.
func verdict(ctx context.Context, b *brokertest.Broker, s *stockworker.Worker, size int64) (problems, report []string, err error) {
	events, err := read[stockworker.Event](ctx, b, s.Source)
	if err != nil {
		return nil, nil, err
	}
	emitted, err := read[stockworker.Window](ctx, b, s.Sink)
	if err != nil {
		return nil, nil, err
	}
	want := map[string]int64{} // partition/id -> window start
	amount := map[int]float64{}
	for _, e := range events {
		ts := e.CreatedAt.UnixMilli()
		want[fmt.Sprint(e.Partition, "/", e.Data.ID)] = ts - ts%size
		amount[e.Data.ID] = e.Data.Amount
	}
	seen := map[string]int{}
	windows := map[string]int{}
	for _, e := range emitted {
		w := e.Data
		windows[fmt.Sprint(e.Partition, "/", w.WindowStart)]++
		sum := 0.0
		for _, id := range w.IDs {
			k := fmt.Sprint(e.Partition, "/", id)
			seen[k]++
			sum += amount[id]
			if start, ok := want[k]; !ok || start != w.WindowStart {
				problems = append(problems, fmt.Sprintf("event %s is in window %d, its event time is in %d", k, w.WindowStart, start))
			}
		}
		if w.Count != len(w.IDs) || w.Sum != sum {
			problems = append(problems, fmt.Sprintf("window %s/%d: count %d sum %v for events %v", e.Partition, w.WindowStart, w.Count, w.Sum, w.IDs))
		}
	}
	for k, n := range windows {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("window %s emitted %d times", k, n))
		}
	}
	for k := range want {
		if seen[k] != 1 {
			problems = append(problems, fmt.Sprintf("event %s counted %d times", k, seen[k]))
		}
	}
	sort.Strings(problems)
	for _, e := range events {
		report = append(report, fmt.Sprintf("  event %s/%d at %d", e.Partition, e.Data.ID, e.CreatedAt.UnixMilli()))
	}
	for _, e := range emitted {
		report = append(report, fmt.Sprintf("  emitted %s %d..%d %v", e.Partition, e.Data.WindowStart, e.Data.WindowEnd, e.Data.IDs))
	}
	return slices.Compact(problems), report, nil
}

// stored is a message as the log holds it.
type stored[T any] struct {
	CreatedAt time.Time
	Partition string
	Data      T
}

// read decodes every message stored in queue.
func read[T any](ctx context.Context, b *brokertest.Broker, queue string) ([]stored[T], error) {
	parts, err := b.Log(ctx, b.Tenant, queue)
	if err != nil {
		return nil, err
	}
	var out []stored[T]
	for _, p := range parts {
		for _, f := range p.Frames {
			m := stored[T]{CreatedAt: time.UnixMicro(f.CreatedAt), Partition: p.Name}
			if err := json.Unmarshal(f.Payload, &m.Data); err != nil {
				return nil, fmt.Errorf("%s/%s: %w", queue, p.Name, err)
			}
			out = append(out, m)
		}
	}
	return out, nil
}
