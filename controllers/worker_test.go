package controllers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/cluster"
)

// The lifecycle under the reference worker (cmd/regent-worker), running as
// a process against the harness's broker: every event lands in one
// one-minute window of 2030, which neither the watermark nor the idle flush
// closes while the test runs, so the window's count in the state is the
// number of times its events were folded.

var window = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// workerIdle is the reference worker's -idle: short, since the window is
// never ripe, and a suspended worker is watched for longer than it.
const workerIdle = time.Second

// workerQuery registers StreamQuery clicks on orders, with the worker's
// own config hash, and starts a reference worker on it.
type workerQuery struct {
	h      *harness
	q      *v1.StreamQuery
	log    string
	exited chan error
	pushed int
}

func startWorkerQuery(t *testing.T) *workerQuery {
	t.Helper()
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	h.startOperator(operatorOpts{resync: 300 * time.Millisecond})
	bin := cluster.Binary(t, "regent-worker")
	out, err := exec.Command(bin, "-print-config-hash").Output()
	if err != nil {
		t.Fatal(err)
	}
	w := &workerQuery{h: h, log: filepath.Join(t.TempDir(), "worker.log"), exited: make(chan error, 1)}
	w.q = h.reason(h.query(h.namespace(h.tenant("acme")), "clicks", func(q *v1.StreamQuery) {
		q.Spec.ConfigHash = strings.TrimSpace(string(out))
	}), v1.ReasonRegistered)
	// A short lease: a cycle refused during a suspension leaves its batch
	// leased until the lease expires.
	if r := h.broker.Do(t, "POST", "/api/v1/configure", h.token(h.tenant("acme")), map[string]any{"queue": "orders", "options": map[string]any{"leaseTime": 2}}); r.Status != http.StatusOK {
		t.Fatalf("configure: %d %s", r.Status, r.Body)
	}
	log, err := os.Create(w.log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-broker", h.broker.URL, "-token", h.token(h.tenant("acme")), "-query", "clicks",
		"-source", "orders", "-sink", "orders.out", "-batch", "20", "-workers", "2", "-idle", workerIdle.String(), "-wait", "300ms", "-listen", "")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-w.exited
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(w.log)
			t.Logf("worker log:\n%s", b)
		}
	})
	return w
}

// push pushes n events of five keys into the window.
func (w *workerQuery) push(n int) {
	w.h.t.Helper()
	items := make([]map[string]any, n)
	for i := range items {
		ts := window.Add(time.Duration(w.pushed+i) * time.Millisecond).UnixMilli()
		items[i] = map[string]any{"queue": "orders", "payload": map[string]any{"key": fmt.Sprintf("k%d", i%5), "ts": ts}}
	}
	w.pushed += n
	if r := w.h.broker.Do(w.h.t, "POST", "/api/v1/push", w.h.token(w.h.tenant("acme")), map[string]any{"items": items}); r.Status != http.StatusCreated {
		w.h.t.Fatalf("push: %d %s", r.Status, r.Body)
	}
}

// folded is the sum of the window's counts in the query's state, and the
// group's committed offset.
func (w *workerQuery) folded() (sum, committed int64) {
	w.h.t.Helper()
	// A window row holds each aggregate's accumulator in aggs, with the
	// number of its events in n.
	state, err := w.h.broker.DB.StateOf(w.h.ctx, w.q.Status.QueryID)
	if err != nil {
		w.h.t.Fatal(err)
	}
	for _, s := range state {
		var row struct {
			Aggs []struct {
				N int64 `json:"n"`
			} `json:"aggs"`
		}
		if err := json.Unmarshal([]byte(s.Value), &row); err != nil {
			w.h.t.Fatalf("state %s: %v", s.Key, err)
		}
		if len(row.Aggs) > 0 {
			sum += row.Aggs[0].N
		}
	}
	for _, c := range w.h.cursors("streams.clicks") {
		committed += c.Committed
	}
	return sum, committed
}

// foldedAll waits until the worker has folded every event pushed, and
// requires each to be counted exactly once.
func (w *workerQuery) foldedAll(what string) {
	w.h.t.Helper()
	brokertest.Eventually(w.h.t, wait, func() error {
		sum, committed := w.folded()
		if sum > int64(w.pushed) {
			w.h.t.Fatalf("%s: the window counts %d events of %d pushed: some were folded twice", what, sum, w.pushed)
		}
		if sum != int64(w.pushed) || committed != int64(w.pushed) {
			return fmt.Errorf("%s: the window counts %d of %d events, cursor at %d", what, sum, w.pushed, committed)
		}
		return nil
	})
}

// healthy requires the worker to be running and to have logged no error.
func (w *workerQuery) healthy() {
	w.h.t.Helper()
	select {
	case err := <-w.exited:
		w.exited <- err
		w.h.t.Fatalf("the worker exited: %v", err)
	default:
	}
	f, err := os.Open(w.log)
	if err != nil {
		w.h.t.Fatal(err)
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		if strings.Contains(s.Text(), "level=ERROR") {
			w.h.t.Fatalf("the worker logged an error: %s", s.Text())
		}
	}
}

func TestSuspendIdlesARunningReferenceWorkerAndResumingFoldsEveryEventExactlyOnce(t *testing.T) {
	w := startWorkerQuery(t)
	h := w.h
	w.push(200)
	w.foldedAll("before the suspension")

	edit(h, w.q, func(q *v1.StreamQuery) { q.Spec.Suspend = true })
	eventually(h, w.q, "Suspended", func(q *v1.StreamQuery) bool { s, _ := condition(q, v1.ConditionSuspended); return s == "True" })
	w.push(100)
	// Real time: nothing is to happen while suspended, and nothing tells
	// a test that nothing happened. Longer than the worker's idle timeout,
	// so that its idle flush runs (and is refused) too.
	time.Sleep(workerIdle + workerIdle/2)
	if sum, committed := w.folded(); sum != 200 || committed != 200 {
		t.Fatalf("while suspended the window went to %d and the cursor to %d, want both left at 200", sum, committed)
	}
	for _, c := range h.cursors("streams.clicks") {
		if c.LeaseExpiresAt != nil && c.LeaseExpiresAt.After(h.dbNow()) {
			t.Fatalf("a lease held while suspended, on partition %s", c.Partition)
		}
	}
	w.healthy()

	edit(h, w.q, func(q *v1.StreamQuery) { q.Spec.Suspend = false })
	w.foldedAll("after the resume")
	w.healthy()
}

func TestRewindReFoldsTheSameWindowToTheSameSumExactlyOnce(t *testing.T) {
	w := startWorkerQuery(t)
	h := w.h
	before := h.dbNow()
	w.push(150)
	w.push(150) // two segments
	w.foldedAll("the first fold")

	value := before.UTC().Format(time.RFC3339Nano)
	rewindTo(h, w.q, value)
	q := eventually(h, w.q, "rewound", func(q *v1.StreamQuery) bool { return q.Status.LastRewind != nil && q.Status.LastRewind.To == value })
	if q.Status.LastRewind.Partitions != 1 {
		t.Fatalf("lastRewind %+v, want the one partition moved", q.Status.LastRewind)
	}
	w.foldedAll("the refold")
	// The refold went through the source again: the group consumed every
	// event twice, and the window still counts each once.
	if n := h.cursor("streams.clicks").TotalConsumed; n != 600 {
		t.Fatalf("the group consumed %d messages, want 600: each event once before the rewind and once after", n)
	}
	w.healthy()
}
