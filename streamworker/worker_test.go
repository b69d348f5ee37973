package streamworker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/api/streams/wire"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/pipeline"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// countingWorker is a worker, on the package's shared broker, of query
// b.Q(query) on source b.Q("src") and sink b.Q("out"), whose pipeline
// counts each key's events by the minute. In secure mode the test's
// tenant is not the default one, and takes a quota grant to register.
func countingWorker(t *testing.T, query string) (*brokertest.Broker, *Worker, *pipeline.Program) {
	t.Helper()
	b := brokertest.Shared(t)
	if brokertest.Secure() {
		b.Grant(t, b.Tenant, nil)
	}
	prog, err := pipeline.Compile(v1.Pipeline{KeyBy: "payload.k", EventTime: "payload.ts",
		Window:    &v1.Window{Type: v1.WindowTumbling, Size: &metav1.Duration{Duration: time.Minute}},
		Aggregate: []v1.Aggregate{{Name: "n", Fn: v1.FnCount}}})
	if err != nil {
		t.Fatal(err)
	}
	w := New(Config{Broker: b.URL, Token: b.Token, Query: b.Q(query), Source: b.Q("src"), Sink: b.Q("out"), Program: prog, Batch: 10,
		Concurrency: 1, Wait: 100 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return b, w, prog
}

// pushEvent pushes an event of key "a" at event time ts to src's partition p.
func pushEvent(t *testing.T, b *brokertest.Broker, ts int64) {
	t.Helper()
	if r := b.Do(t, "POST", "/api/v1/push", b.Token, map[string]any{"items": []map[string]any{
		{"queue": b.Q("src"), "partition": "p", "payload": map[string]any{"k": "a", "ts": ts}}}}); r.Status != http.StatusCreated {
		t.Fatalf("push = %d %s", r.Status, r.Body)
	}
}

// foldFirst registers the worker, then pops and folds the first batch.
func foldFirst(t *testing.T, w *Worker) *wire.Batch {
	ctx := t.Context()
	t.Helper()
	if err := w.register(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := w.pop(ctx)
	if err != nil || first == nil {
		t.Fatalf("pop: %v, %v", first, err)
	}
	if err := w.process(ctx, ctx, first); err != nil {
		t.Fatal(err)
	}
	return first
}

// TestOfTwoCyclesThatReadTheSameStateTheSecondIsRefused is the rule the
// exactly-once argument rests on when a flush runs beside a fold: both read
// the partition's state, the fold commits, and the flush, whose clock row
// and window rows carry the updated_at they were read with, is refused by a
// real broker, writing nothing.
func TestOfTwoCyclesThatReadTheSameStateTheSecondIsRefused(t *testing.T) {
	t.Parallel()
	b, w, prog := countingWorker(t, "race")
	ctx := context.Background()
	pushEvent(t, b, 1_000)
	first := foldFirst(t, w)
	p := w.partition(first.PartitionID, first.Partition)

	// The flush reads the open window and the clock ...
	rows, err := w.readState(ctx, p, map[string]any{"key_prefix": pipeline.Prefix})
	if err != nil || len(rows) != 2 {
		t.Fatalf("state: %v, %v; want the window and the clock", rows, err)
	}
	flush, err := prog.NewShard(w.scope(p), rows)
	if err != nil {
		t.Fatal(err)
	}
	// ... a fold commits on the partition ...
	pushEvent(t, b, 2_000)
	second, err := w.pop(ctx)
	if err != nil || second == nil {
		t.Fatalf("pop: %v, %v", second, err)
	}
	if err := w.process(ctx, ctx, second); err != nil {
		t.Fatal(err)
	}
	// ... and the flush, which read before it, is refused.
	flush.Flush(time.Now())
	ops, pushes, err := flush.Commit(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.IfUpdatedAt == "" {
			t.Fatalf("op %s %q carries no if_updated_at", op.Type, op.Key)
		}
	}
	body, err := w.cycleBody(p, ops, pushes, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out wire.CycleResponse
	if _, err := w.c.call(ctx, "POST", "/streams/v1/cycle", body, &out); err != nil {
		t.Fatal(err)
	}
	if out.Success || !strings.Contains(out.Error, "stale state") {
		t.Fatalf("the stale flush: success %v, error %q; want it refused as stale", out.Success, out.Error)
	}
	after, err := w.readState(ctx, p, map[string]any{"key_prefix": pipeline.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	s, err := prog.NewShard(w.scope(p), after)
	if err != nil {
		t.Fatal(err)
	}
	window := after[0]
	if window.Key == pipeline.ClockKey {
		window = after[1]
	}
	if s.Watermark() != 2_000 || len(after) != 2 || !strings.Contains(string(window.Value), `"aggs": [{"n": 2}]`) {
		t.Fatalf("state after the refused flush: %s; want the fold's window of two events and watermark 2000", after)
	}
}

// A worker of the old pipeline that is still running when the query is
// reset to a new one (an upgrade) has its next cycle refused with a 409,
// writes nothing, and stops: it never folds the old shape into the new
// state.
func TestAWorkerWhoseQueryWasResetSinceItRegisteredStops(t *testing.T) {
	t.Parallel()
	b, w, _ := countingWorker(t, "upgraded")
	ctx := context.Background()
	if err := w.register(ctx); err != nil {
		t.Fatal(err)
	}
	if w.generation == nil || *w.generation != 0 {
		t.Fatalf("the worker registered with generation %v, want 0 from the broker's header", w.generation)
	}
	reset := b.Do(t, "POST", "/streams/v1/queries", "", map[string]any{"name": b.Q("upgraded"), "source_queue": b.Q("src"),
		"sink_queue": b.Q("out"), "config_hash": "the new pipeline's", "reset": true})
	if reset.Status != http.StatusOK {
		t.Fatalf("reset = %d %s", reset.Status, reset.Body)
	}
	pushEvent(t, b, 1_000)
	run, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := w.loop(run, run)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "stale generation") {
		t.Fatalf("the worker's loop ended with %v, want the cycle's 409 stale generation", err)
	}
	if n := b.StateRows(t, reset.Map(t)["query_id"].(string)); n != 0 {
		t.Fatalf("the refused worker wrote %d state rows", n)
	}
}

// A flush of a partition that is not idle is deferred by the broker (a
// success that applied nothing): the worker counts no window emitted, and
// the window stays for the next flush.
func TestAFlushTheBrokerDefersEmitsAndCountsNothing(t *testing.T) {
	t.Parallel()
	b, w, _ := countingWorker(t, "deferred")
	ctx := context.Background()
	pushEvent(t, b, 1_000)
	batch := foldFirst(t, w)
	pushEvent(t, b, 2_000) // not acknowledged: the partition is not idle
	// Quiet by the worker's own measure (any fold is long enough ago),
	// which the broker's rule overrides.
	w.cfg.Program.IdleFlush = 0
	p := w.partition(batch.PartitionID, batch.Partition)
	if err := w.flush(ctx, p); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(w.m.deferred); n != 1 {
		t.Fatalf("%v flushes deferred, want 1", n)
	}
	if n := testutil.ToFloat64(w.m.emitted); n != 0 {
		t.Fatalf("%v windows counted emitted by a deferred flush", n)
	}
	rows, err := w.readState(ctx, p, map[string]any{"key_prefix": pipeline.Prefix})
	if err != nil || len(rows) != 2 {
		t.Fatalf("state after the deferred flush: %v, %v; want the window and the clock", rows, err)
	}
}

// A worker given no sink queue runs only a query whose sink is a table,
// whose rows its cycles write: each closed window once.
func TestAWorkerWritesAQuerysWindowsIntoItsTableSinkAndNeedsASinkOfSomeKind(t *testing.T) {
	t.Parallel()
	b, w, _ := countingWorker(t, "tabled")
	w.cfg.Sink = ""
	if err := w.Run(t.Context()); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("query %q has no sink", b.Q("tabled"))) {
		t.Fatalf("a worker with neither a sink queue nor a table sink ran: %v", err)
	}
	table := b.Q("counts")
	b.CreateTable(t, table, []dbtest.TableColumn{{Name: "key", Type: "text"}, {Name: "windowStart", Type: "timestamptz"},
		{Name: "windowEnd", Type: "timestamptz"}, {Name: "n", Type: "bigint"}}, "key", "windowStart")
	if r := b.Do(t, "POST", "/streams/v1/queries", b.Token, map[string]any{"name": b.Q("tabled"), "source_queue": b.Q("src"),
		"config_hash": w.cfg.Program.Hash, "sink_table": map[string]any{"table": table, "key_columns": []string{"key", "windowStart"}}}); r.Status != http.StatusOK {
		t.Fatalf("register = %d %s", r.Status, r.Body)
	}
	pushEvent(t, b, 1_000)
	pushEvent(t, b, 2_000)
	pushEvent(t, b, 200_000) // the watermark passes the first minute: its window closes
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	want := `{"n": 2, "key": "a", "windowEnd": "1970-01-01T00:01:00+00:00", "windowStart": "1970-01-01T00:00:00+00:00"}`
	brokertest.Eventually(t, 30*time.Second, func() error {
		if rows := b.TableRows(t, table); len(rows) != 1 || rows[0] != want {
			return fmt.Errorf("table rows %v, want %s", rows, want)
		}
		return nil
	})
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) { // no drain: the pop in flight is cut
		t.Fatal(err)
	}
}

// pushEvents pushes n events of key "a" to src's partition p, at event
// times from ts on, a second apart.
func pushEvents(t *testing.T, b *brokertest.Broker, ts int64, n int) {
	t.Helper()
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"queue": b.Q("src"), "partition": "p", "payload": map[string]any{"k": "a", "ts": ts + int64(i)*1_000}}
	}
	if r := b.Do(t, "POST", "/api/v1/push", b.Token, map[string]any{"items": items}); r.Status != http.StatusCreated {
		t.Fatalf("push = %d %s", r.Status, r.Body)
	}
}

// wantCount requires that the partition's one window counted n events.
func wantCount(t *testing.T, w *Worker, p *partition, n int) {
	t.Helper()
	rows, err := w.readState(t.Context(), p, map[string]any{"key_prefix": pipeline.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Key != pipeline.ClockKey && !strings.Contains(string(r.Value), fmt.Sprintf(`"aggs": [{"n": %d}]`, n)) {
			t.Fatalf("window %s, want %d events counted", r.Value, n)
		}
	}
}

// popAndKeep registers w, pops its first batch and folds it, asking for the
// next one: it returns the next batch and the state it holds.
func popAndKeep(t *testing.T, w *Worker) (*partition, *wire.Batch, *pipeline.Shard) {
	t.Helper()
	ctx := t.Context()
	if err := w.register(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := w.pop(ctx)
	if err != nil || first == nil {
		t.Fatalf("pop: %v, %v", first, err)
	}
	p := w.partition(first.PartitionID, first.Partition)
	next, held, err := w.foldBatch(ctx, p, first, nil, true)
	if err != nil || next == nil || held == nil {
		t.Fatalf("the first cycle brought next batch %v and state %v (%v), want both", next, held, err)
	}
	return p, next, held
}

// popPartition pops w's next batch of src's partition p: a lease that the
// test expired is not seen by the queue-wide pop before it was due.
func popPartition(t *testing.T, b *brokertest.Broker, w *Worker) *wire.Batch {
	t.Helper()
	r := b.Do(t, "GET", "/api/v1/pop/queue/"+b.Q("src")+"/partition/p?batch=10&consumerGroup="+w.group, b.Token, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("pop = %d %s", r.Status, r.Body)
	}
	var batch wire.Batch
	r.JSON(t, &batch)
	return &batch
}

func TestTheWorkerFoldsUnderTheKeptLeaseWithoutReadingTheStateAgain(t *testing.T) {
	t.Parallel()
	b, w, _ := countingWorker(t, "kept")
	pushEvents(t, b, 1_000, 30)
	first := foldFirst(t, w)
	if n := testutil.ToFloat64(w.m.stateReads); n != 1 {
		t.Fatalf("%v state reads for three batches under the kept lease, want 1", n)
	}
	if n := testutil.ToFloat64(w.m.cycles.WithLabelValues(kindFold)); n != 3 {
		t.Fatalf("%v fold cycles, want 3", n)
	}
	if n := testutil.ToFloat64(w.m.eventsIn); n != 30 {
		t.Fatalf("%v events counted, want 30", n)
	}
	wantCount(t, w, w.partition(first.PartitionID, first.Partition), 30)
}

// A lease that expires under a worker's held state refuses its cycle: the
// worker drops the state, reads it again, and the batch, redelivered, is
// folded once.
func TestALostLeaseSendsTheWorkerBackToStateGet(t *testing.T) {
	t.Parallel()
	b, w, _ := countingWorker(t, "lost")
	pushEvents(t, b, 1_000, 20)
	p, next, held := popAndKeep(t, w)
	b.ExpireLeases(t, b.Q("src"))
	again, kept, err := w.foldBatch(t.Context(), p, next, held, true)
	if err != nil || again != nil || kept != nil {
		t.Fatalf("a fold under a lost lease brought %v, %v (%v), want nothing", again, kept, err)
	}
	if n := testutil.ToFloat64(w.m.stateReads); n != 1+refolds-1 {
		t.Fatalf("%v state reads, want the first and one per refold after the refused held state", n)
	}
	redelivered := popPartition(t, b, w)
	if len(redelivered.Messages) != 10 {
		t.Fatalf("pop after the lost lease: %v; want the batch again", redelivered)
	}
	if err := w.process(t.Context(), t.Context(), redelivered); err != nil {
		t.Fatal(err)
	}
	wantCount(t, w, p, 20)
}

// The kill suite's rule, step by step: a worker whose lease was taken over
// while it held the partition's state folds nothing into the new owner's.
func TestAWorkerWhoseLeaseWasTakenOverFoldsNothingIntoTheNewOwnersState(t *testing.T) {
	t.Parallel()
	b, w, prog := countingWorker(t, "taken")
	pushEvents(t, b, 1_000, 20)
	p, next, held := popAndKeep(t, w)
	b.ExpireLeases(t, b.Q("src"))
	other := New(Config{Broker: b.URL, Token: b.Token, Query: b.Q("taken"), Source: b.Q("src"), Sink: b.Q("out"), Program: prog, Batch: 10,
		Concurrency: 1, Wait: 100 * time.Millisecond, Log: w.log})
	if err := other.register(t.Context()); err != nil {
		t.Fatal(err)
	}
	taken := popPartition(t, b, other)
	if len(taken.Messages) != 10 || taken.LeaseID == next.LeaseID {
		t.Fatalf("the other worker's pop: %v; want the batch under a lease of its own", taken)
	}
	if err := other.process(t.Context(), t.Context(), taken); err != nil {
		t.Fatal(err)
	}
	if again, kept, err := w.foldBatch(t.Context(), p, next, held, true); err != nil || again != nil || kept != nil {
		t.Fatalf("the first worker's fold brought %v, %v (%v), want nothing", again, kept, err)
	}
	if n := testutil.ToFloat64(w.m.refused.WithLabelValues(kindFold)); n != refolds {
		t.Fatalf("%v of the first worker's cycles refused, want all %d", n, refolds)
	}
	wantCount(t, w, p, 20)
}
