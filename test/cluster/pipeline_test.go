package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/pipeline"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/cluster"
	"github.com/regent-mq/regent/test/foldref"
	"github.com/regent-mq/regent/test/pgtest"
)

// A pipeline run: regent-worker processes, several on one query, over two
// brokers, while workers and brokers are SIGKILLed in turn. At the end the
// sink must hold exactly what the plain reference fold (test/foldref) gives
// over the same events: every window, every aggregate, none twice, none
// missing; and the late queue every late event, once.

const (
	pipelineWorkers = 3
	lateQueue       = "events.late"
)

type pipelineRun struct {
	t          *testing.T
	name       string
	pipeline   v1.Pipeline
	partitions int
	events     [][]foldref.Event // by partition
	bs         []*cluster.Broker
	api        *brokertest.Broker
	pool       *pgxpool.Pool
	workers    []*workerProc
	total      int64
}

// workerProc is a regent-worker process that the test SIGKILLs and starts
// again with the same flags.
type workerProc struct {
	t    *testing.T
	args []string
	log  *os.File
	mu   sync.Mutex
	cmd  *exec.Cmd
}

func (w *workerProc) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cmd = exec.Command(cluster.Binary(w.t, "regent-worker"), w.args...)
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	if err := w.cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
}

func (w *workerProc) kill() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil {
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
		w.cmd = nil
	}
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// generate makes each partition's events: times that mostly rise, five
// keys, amounts from -20 to 179, and every lateEvery-th event ten minutes
// behind (late, whatever the window), none when lateEvery is 0.
func generate(partitions, perPartition, lateEvery int, step int64) [][]foldref.Event {
	base := time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC).UnixMilli()
	keys := []string{"acme", "globex", "initech", "umbrella", "hooli"}
	out := make([][]foldref.Event, partitions)
	for p := range out {
		rng := rand.New(rand.NewPCG(uint64(p), 26))
		ts := base + int64(p)*13
		for j := range perPartition {
			ts += 1 + rng.Int64N(step)
			e := foldref.Event{Key: keys[rng.IntN(len(keys))], TS: ts, Amount: rng.Int64N(200) - 20}
			if lateEvery > 0 && j%lateEvery == lateEvery-1 {
				e.TS -= 600_000
			}
			out[p] = append(out[p], e)
		}
	}
	return out
}

func startPipelineRun(t *testing.T, name string, pipeline v1.Pipeline, events [][]foldref.Event) *pipelineRun {
	t.Helper()
	r := newPipelineRun(t, name, len(events), 2)
	r.pipeline, r.events = pipeline, events
	r.push(events)
	r.startWorkers(pipeline, "events.out", pipelineWorkers)
	return r
}

// newPipelineRun starts the brokers of a run over a source of partitions
// partitions, with no event and no worker yet.
func newPipelineRun(t *testing.T, name string, partitions, brokers int) *pipelineRun {
	t.Helper()
	return newPipelineRunOn(t, pgtest.URL(t), name, partitions, brokers)
}

// newPipelineRunOn is newPipelineRun on the database db.
func newPipelineRunOn(t *testing.T, db, name string, partitions, brokers int) *pipelineRun {
	t.Helper()
	r := &pipelineRun{t: t, name: name, partitions: partitions, bs: cluster.Start(t, db, brokers)}
	r.api = brokertest.At(r.bs[0].URL)
	// A short lease: a pop whose answer a kill swallowed leaves a lease
	// that hides its partition until it expires.
	if res := r.api.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": "events", "options": map[string]any{"leaseTime": 2}}); res.Status != http.StatusOK {
		t.Fatalf("configure = %d %s", res.Status, res.Body)
	}
	pool, err := pgxpool.New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r.pool = pool
	return r
}

func (r *pipelineRun) push(events [][]foldref.Event) {
	var items []map[string]any
	send := func() {
		if res := r.api.Do(r.t, "POST", "/api/v1/push", "", map[string]any{"items": items}); res.Status != http.StatusCreated {
			r.t.Fatalf("push = %d %s", res.Status, res.Body)
		}
		items = nil
	}
	for p, evs := range events {
		for _, e := range evs {
			items = append(items, map[string]any{"queue": "events", "partition": fmt.Sprintf("p%d", p), "payload": e.Payload()})
			r.total++
			if len(items) == 1000 {
				send()
			}
		}
	}
	if len(items) > 0 {
		send()
	}
}

// consumed is how many events the query has committed, or -1 while the
// database cannot say.
func (r *pipelineRun) consumed() int64 {
	n, err := dbtest.New(r.pool).GroupCommitted(context.Background(), "streams."+r.name)
	if err != nil {
		return -1
	}
	return n
}

// kill SIGKILLs workers and brokers in turn, each at a random point of its
// slice of the run, reached by progress rather than by time. From the
// first kill on, it also stalls the one worker it never kills (SIGSTOP) for
// longer than the lease, which the other workers then take over, and lets
// it go on (SIGCONT) with the partition's state that it held in memory: it
// must fold nothing into the new owner's state.
func (r *pipelineRun) kill(kills int) (midRun int) {
	var stalls sync.WaitGroup
	defer stalls.Wait()
	slice := r.total / int64(kills+1)
	for k := range kills {
		target := int64(k+1)*slice + rand.Int64N(slice/2)
		r.waitConsumed(target)
		if r.consumed() < r.total {
			midRun++
		}
		if k == 0 {
			stalls.Go(func() { r.workers[len(r.workers)-1].stall(stallFor) })
		}
		w := r.workers[k%len(r.workers)]
		kill, start := w.kill, w.start
		if k%3 == 2 {
			b := r.bs[k%len(r.bs)]
			kill, start = b.Kill, b.Start
		}
		kill()
		// Real time: what is killed stays down a random while, as a
		// crashed pod does.
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		start()
	}
	if midRun < kills-1 {
		r.t.Fatalf("only %d of %d kills hit the workers mid-run", midRun, kills)
	}
	return midRun
}

// stallFor is longer than the run's lease (leaseTime 2).
const stallFor = 3 * time.Second

// stall stops the worker for d, then lets it go on. Real time: a pause
// longer than the lease, as a GC pause or a frozen VM makes, is the
// scenario; the lease ends by the database's clock while the process is
// stopped, and its own timers are due all at once when it goes on.
func (w *workerProc) stall(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return
	}
	_ = w.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(d)
	_ = w.cmd.Process.Signal(syscall.SIGCONT)
}

// settle waits until the query has consumed every event pushed and its
// idle flushes have closed every window.
func (r *pipelineRun) settle() {
	r.t.Helper()
	brokertest.Eventually(r.t, 90*time.Second, func() error {
		open, err := dbtest.New(r.pool).CountState(context.Background(), pipeline.ClockKey)
		if n := r.consumed(); err != nil || n != r.total || open != 0 {
			return fmt.Errorf("not settled: %d of %d events consumed, %d windows open (%v)", n, r.total, open, err)
		}
		return nil
	})
}

// drain pops every message of queue, by partition.
func (r *pipelineRun) drain(queue string) map[string][]json.RawMessage {
	out := map[string][]json.RawMessage{}
	for empty := 0; empty < 3; {
		res := r.api.Do(r.t, "GET", "/api/v1/pop/queue/"+queue+"?batch=1000&partitions=100&autoAck=true", "", nil)
		if res.Status == http.StatusNoContent {
			empty++
			continue
		}
		empty = 0
		var page struct {
			Messages []struct {
				Partition string          `json:"partition"`
				Data      json.RawMessage `json:"data"`
			} `json:"messages"`
		}
		if res.Status != http.StatusOK {
			r.t.Fatalf("pop %s = %d %s", queue, res.Status, res.Body)
		}
		res.JSON(r.t, &page)
		for _, m := range page.Messages {
			out[m.Partition] = append(out[m.Partition], m.Data)
		}
	}
	return out
}

// refused counts the cycles the broker refused the workers, from their
// logs: the leases and preconditions the exactly-once argument rests on, at
// work.
func (r *pipelineRun) refused() int {
	n := 0
	for _, w := range r.workers {
		out, err := os.ReadFile(w.log.Name())
		if err != nil {
			r.t.Fatal(err)
		}
		n += strings.Count(string(out), "cycle refused")
	}
	return n
}

// figures is what a run checked.
type figures struct {
	events, windows, late, lost, duplicated, wrong int
}

// checkWindows compares the sink with the reference fold of each
// partition's events (minus the late ones, which must be in the late
// queue), keeping the windows keep lets through.
func (r *pipelineRun) checkWindows(want []map[string]foldref.Window, wantLate [][]foldref.Event) figures {
	t := r.t
	f := figures{events: int(r.total)}
	sink, late := r.drain("events.out"), r.drain(lateQueue)
	for p := range want {
		name := fmt.Sprintf("p%d", p)
		got := map[string]foldref.Window{}
		for _, raw := range sink[name] {
			var w foldref.Window
			if err := json.Unmarshal(raw, &w); err != nil {
				t.Fatalf("sink message %s: %v", raw, err)
			}
			if _, twice := got[w.ID()]; twice {
				f.duplicated++
				t.Errorf("partition %s: window %s emitted twice", name, w.ID())
			}
			got[w.ID()] = w
		}
		for id, w := range want[p] {
			f.windows++
			g, ok := got[id]
			switch {
			case !ok:
				f.lost++
				t.Errorf("partition %s: window %s missing", name, id)
			case g != w:
				f.wrong++
				t.Errorf("partition %s: window %s\n got %+v\nwant %+v", name, id, g, w)
			}
		}
		for id := range got {
			if _, ok := want[p][id]; !ok {
				f.wrong++
				t.Errorf("partition %s: window %s emitted, not in the reference", name, id)
			}
		}
		f.late += r.checkLate(name, late[name], wantLate[p], &f)
	}
	return f
}

// checkLate checks that the late queue's partition holds exactly the late
// events, once each.
func (r *pipelineRun) checkLate(partition string, got []json.RawMessage, want []foldref.Event, f *figures) int {
	seen := map[foldref.Event]int{}
	for _, raw := range got {
		var e foldref.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			r.t.Fatal(err)
		}
		seen[e]++
	}
	for _, e := range want {
		switch seen[e] {
		case 0:
			f.lost++
			r.t.Errorf("partition %s: late event %+v not in the late queue", partition, e)
		case 1:
		default:
			f.duplicated++
			r.t.Errorf("partition %s: late event %+v in the late queue %d times", partition, e, seen[e])
		}
		delete(seen, e)
	}
	for e := range seen {
		f.wrong++
		r.t.Errorf("partition %s: %+v in the late queue, not late in the reference", partition, e)
	}
	return len(want)
}

// reference folds each partition's events and splits off the late ones.
func reference(w v1.Window, watermark int64, events [][]foldref.Event, keep func(foldref.Window) bool) ([]map[string]foldref.Window, [][]foldref.Event) {
	windows := make([]map[string]foldref.Window, len(events))
	late := make([][]foldref.Event, len(events))
	for p, evs := range events {
		all, lateIdx := foldref.Fold(w, watermark, evs)
		windows[p] = map[string]foldref.Window{}
		for id, win := range all {
			if keep == nil || keep(win) {
				windows[p][id] = win
			}
		}
		for _, i := range lateIdx {
			late[p] = append(late[p], evs[i])
		}
	}
	return windows, late
}

// size is the run's size: bounded under make test, longer under make chaos.
// Under make test it is what a quiet machine's workers need to still be
// folding at the third kill: with 1,500 events a partition they were done
// with a sliding run before its second.
func runSize() (partitions, perPartition, kills int) {
	if chaos {
		return 8, 6000, 9
	}
	return 4, 6000, 3
}

func windowedRun(t *testing.T, name string, w v1.Window, step int64, lateEvery int, having string, keep func(foldref.Window) bool) {
	partitions, perPartition, kills := runSize()
	events := generate(partitions, perPartition, lateEvery, step)
	p := foldref.Pipeline(w)
	p.Having, p.Late = having, lateQueue
	r := startPipelineRun(t, name, p, events)
	midRun := r.kill(kills)
	r.settle()
	want, late := reference(w, 0, events, keep)
	f := r.checkWindows(want, late)
	t.Logf("figures: %d kills and a stall (%d mid-run), %d events, %d windows, %d late, %d cycles refused; lost %d, duplicated %d, wrong %d",
		kills, midRun, f.events, f.windows, f.late, r.refused(), f.lost, f.duplicated, f.wrong)
}

func TestATumblingPipelineWithLatenessStaysExactlyOnceWhileWorkersAndBrokersAreKilled(t *testing.T) {
	windowedRun(t, "tumbling", v1.Window{Type: v1.WindowTumbling, Size: dur(10 * time.Second), AllowedLateness: dur(2 * time.Second),
		IdleFlush: dur(3 * time.Second)}, 300, 40, "", nil)
}

func TestASlidingPipelineStaysExactlyOnceWhileWorkersAndBrokersAreKilled(t *testing.T) {
	windowedRun(t, "sliding", v1.Window{Type: v1.WindowSliding, Size: dur(10 * time.Second), Slide: dur(5 * time.Second),
		IdleFlush: dur(3 * time.Second)}, 300, 60, "", nil)
}

func TestASessionPipelineStaysExactlyOnceWhileWorkersAndBrokersAreKilled(t *testing.T) {
	windowedRun(t, "session", v1.Window{Type: v1.WindowSession, Gap: dur(1500 * time.Millisecond), AllowedLateness: dur(500 * time.Millisecond),
		IdleFlush: dur(3 * time.Second)}, 300, 60, "", nil)
}

func TestAPipelineWithHavingEmitsExactlyTheWindowsItLetsThroughWhileWorkersAndBrokersAreKilled(t *testing.T) {
	windowedRun(t, "having", v1.Window{Type: v1.WindowTumbling, Size: dur(5 * time.Second), IdleFlush: dur(3 * time.Second)}, 300, 0,
		"orders >= 4 && revenue > 200.0", func(w foldref.Window) bool { return w.Orders >= 4 && w.Revenue > 200 })
}

// TestAStatelessPipelineEmitsEachEventOnceWhileWorkersAndBrokersAreKilled:
// filter and project, no window; each event that passes the filter is in
// the sink once.
func TestAStatelessPipelineEmitsEachEventOnceWhileWorkersAndBrokersAreKilled(t *testing.T) {
	partitions, perPartition, kills := runSize()
	events := generate(partitions, perPartition, 0, 300)
	r := startPipelineRun(t, "stateless", v1.Pipeline{Filter: "payload.amount % 3 != 0",
		Project: "{'key': payload.key, 'ts': payload.ts, 'amount': payload.amount * 2}"}, events)
	midRun := r.kill(kills)
	r.waitConsumed(r.total)
	sink := r.drain("events.out")
	f := figures{events: int(r.total)}
	for p, evs := range events {
		want := map[foldref.Event]int{}
		for _, e := range evs {
			if e.Amount%3 != 0 {
				want[foldref.Event{Key: e.Key, TS: e.TS, Amount: 2 * e.Amount}]++
				f.windows++
			}
		}
		for _, raw := range sink[fmt.Sprintf("p%d", p)] {
			var e foldref.Event
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			switch want[e] {
			case 0:
				f.duplicated++
				t.Errorf("partition p%d: %+v emitted twice, or never pushed", p, e)
			default:
				want[e]--
			}
		}
		for e, n := range want {
			if n > 0 {
				f.lost += n
				t.Errorf("partition p%d: %+v not emitted", p, e)
			}
		}
	}
	t.Logf("figures: %d kills and a stall (%d mid-run), %d events, %d outputs, %d cycles refused; lost %d, duplicated %d",
		kills, midRun, f.events, f.windows, r.refused(), f.lost, f.duplicated)
}

// TestTheIdleFlushClosesEveryWindowOnceAndLaterEventsOfThemAreLate: the
// first events' windows are closed by the idle flush alone (nothing later
// arrives to close them) while workers and brokers are killed; then events
// of those windows are late, and events of the present fold into new
// windows that the flush closes in turn.
func TestTheIdleFlushClosesEveryWindowOnceAndLaterEventsOfThemAreLate(t *testing.T) {
	partitions, perPartition, kills := runSize()
	w := v1.Window{Type: v1.WindowTumbling, Size: dur(2 * time.Second), IdleFlush: dur(3 * time.Second)}
	first := generate(partitions, perPartition, 0, 300)
	p := foldref.Pipeline(w)
	p.Late = lateQueue
	r := startPipelineRun(t, "idle", p, first)
	midRun := r.kill(kills)
	r.settle()
	// The present: these windows end after the flush that closed the
	// first ones, so none of their events is late; the events of the
	// first windows all are.
	now := time.Now().UnixMilli()
	second := make([][]foldref.Event, partitions)
	for p := range second {
		for j := range 30 {
			second[p] = append(second[p], foldref.Event{Key: "acme", TS: now + int64(j*40), Amount: int64(j)})
		}
		for _, e := range first[p][:10] {
			second[p] = append(second[p], foldref.Event{Key: e.Key, TS: e.TS, Amount: 1000 + e.Amount})
		}
	}
	r.push(second)
	r.settle()
	want1, late1 := reference(w, 0, first, nil)
	want2, late2 := reference(w, now, second, nil)
	for p := range want1 {
		for id, win := range want2[p] {
			want1[p][id] = win
		}
		late1[p] = append(late1[p], late2[p]...)
		if len(late2[p]) != 10 {
			t.Fatalf("the reference finds %d late events of the second round on p%d, want 10", len(late2[p]), p)
		}
	}
	f := r.checkWindows(want1, late1)
	t.Logf("figures: %d kills and a stall (%d mid-run), %d events, %d windows, %d late, %d cycles refused; lost %d, duplicated %d, wrong %d",
		kills, midRun, f.events, f.windows, f.late, r.refused(), f.lost, f.duplicated, f.wrong)
}
