package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/cluster"
	"github.com/regent-mq/regent/test/pgtest"
)

// chaos is set by `make chaos`, which runs the long variants.
var chaos = os.Getenv("REGENT_CHAOS") != ""

type windowID struct{ partition, key, start string }

// TestTheReferenceWorkerStaysExactlyOnceWhileReplicasAreKilledInTurn runs
// three regent-worker processes, one on each of three brokers, over the
// same query, while the brokers are SIGKILLed and restarted in turn. The
// sink must hold every window exactly once, counting exactly its events.
func TestTheReferenceWorkerStaysExactlyOnceWhileReplicasAreKilledInTurn(t *testing.T) {
	t.Parallel()
	events, partitions, rounds := 6000, 6, 2
	if chaos {
		events, partitions, rounds = 60000, 12, 6
	}
	db := pgtest.URL(t)
	bs := cluster.Start(t, db, 3)
	first := brokertest.At(bs[0].URL)
	// A short lease: a pop whose answer a kill swallowed leaves a lease that
	// hides its partition until it expires.
	if r := first.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": "events", "options": map[string]any{"leaseTime": 2}}); r.Status != http.StatusOK {
		t.Fatalf("configure = %d %s", r.Status, r.Body)
	}
	want := map[windowID]int64{}
	base := time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC).UnixMilli()
	keys := []string{"acme", "globex", "initech", "umbrella", "hooli"}
	var items []map[string]any
	for i := range events {
		p, j := i%partitions, i/partitions
		ts := base + int64(j)*97 + int64(p)*13 // ordered per partition, a few windows each
		key, partition := keys[(j*7+p)%len(keys)], fmt.Sprintf("p%d", p)
		items = append(items, map[string]any{"queue": "events", "partition": partition, "payload": map[string]any{"key": key, "ts": ts}})
		start := ts - ts%60_000
		want[windowID{partition, key, time.UnixMilli(start).UTC().Format("2006-01-02T15:04:05.000Z")}]++
		if len(items) == 1000 {
			if r := first.Do(t, "POST", "/api/v1/push", "", map[string]any{"items": items}); r.Status != http.StatusCreated {
				t.Fatalf("push = %d %s", r.Status, r.Body)
			}
			items = nil
		}
	}

	worker := cluster.Binary(t, "regent-worker")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan error, len(bs))
	for i, b := range bs {
		log, err := os.Create(filepath.Join(dir, fmt.Sprintf("worker-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		cmd := exec.CommandContext(ctx, worker, "-broker", b.URL, "-query", "chaos.per_minute", "-source", "events",
			"-sink", "events.per_minute", "-batch", "50", "-workers", "2", "-idle", "4s", "-wait", "500ms")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := os.ReadFile(log.Name())
				t.Logf("worker %d log (tail):\n%s", i, out[max(0, len(out)-4096):])
			}
		})
	}

	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	consumed := func() int64 {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT coalesce(sum(committed), 0) FROM queen.cursors WHERE consumer_group = 'streams.chaos.per_minute'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Kill k lands at a random point of the run's k-th slice, reached by
	// progress rather than by time, and kills the replicas in turn.
	kills := rounds * len(bs)
	slice := int64(events / (kills + 1))
	midRun := 0
	for k := range kills {
		target := int64(k+1)*slice + rand.Int64N(slice/2)
		for deadline := time.Now().Add(60 * time.Second); consumed() < target; time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: the workers never reached %d events (at %d)", k+1, target, consumed())
			}
		}
		if consumed() < int64(events) {
			midRun++
		}
		b := bs[k%len(bs)]
		b.Kill()
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		b.Start()
	}
	if midRun < kills-1 {
		t.Fatalf("only %d of %d kills hit the workers mid-run", midRun, kills)
	}

	// Done when the source is consumed and the idle flushes have closed
	// every window.
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var open int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM queen_streams.state WHERE key NOT LIKE '%watermark'`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if consumed() == int64(events) && open == 0 {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("a worker stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done in time: %d of %d events consumed, %d windows open", consumed(), events, open)
		}
	}
	cancel()

	got := map[windowID]int64{}
	var sum, duplicates int64
	for {
		r := first.Do(t, "GET", "/api/v1/pop/queue/events.per_minute?batch=1000&partitions=100&autoAck=true", "", nil)
		if r.Status == http.StatusNoContent {
			break
		}
		var page struct {
			Messages []struct {
				Partition string `json:"partition"`
				Data      struct {
					Key         string `json:"key"`
					WindowStart string `json:"windowStart"`
					Count       int64  `json:"count"`
				} `json:"data"`
			} `json:"messages"`
		}
		if r.Status != http.StatusOK {
			t.Fatalf("pop the sink = %d %s", r.Status, r.Body)
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			id := windowID{m.Partition, m.Data.Key, m.Data.WindowStart}
			if _, twice := got[id]; twice {
				duplicates++
				t.Errorf("window %v emitted twice", id)
			}
			got[id] += m.Data.Count
			sum += m.Data.Count
		}
	}
	var wrong int
	for id, n := range want {
		if got[id] != n {
			wrong++
			if wrong <= 10 {
				t.Errorf("window %v counted %d, want %d", id, got[id], n)
			}
		}
	}
	t.Logf("figures: %d broker kills (%d mid-run), %d events, %d windows; sink sum %d (lost %d), %d duplicated windows, %d wrong windows",
		kills, midRun, events, len(want), sum, int64(events)-sum, duplicates, wrong)
	if sum != int64(events) || len(got) != len(want) {
		t.Errorf("the sink's %d windows count %d events, want %d windows counting exactly %d", len(got), sum, len(want), events)
	}
}
