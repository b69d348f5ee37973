package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/foldref"
)

// An upgrade through a savepoint and a rollback, with real regent-worker
// processes, in the operator's order: the old workers stop and their
// leases expire, a savepoint is taken, the query is reset to the new
// pipeline, whose workers fold the rest of the source into their own sink;
// then they stop, the savepoint is restored, and the old pipeline's
// workers fold again from it. The old pipeline's sink must hold exactly
// the reference fold of every event, none twice and none missing, and the
// new one's only exact windows, each once.

// startWorkers starts n regent-worker processes running p for the query,
// into sink, spread over the brokers.
func (r *pipelineRun) startWorkers(p v1.Pipeline, sink string, n int) []*workerProc {
	t := r.t
	dir := t.TempDir()
	file := filepath.Join(dir, "pipeline.json")
	doc, _ := json.Marshal(map[string]any{"pipeline": p})
	if err := os.WriteFile(file, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	var ws []*workerProc
	for i := range n {
		log, err := os.Create(filepath.Join(dir, fmt.Sprintf("worker-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		w := &workerProc{t: t, log: log, args: []string{"-broker", r.bs[i%len(r.bs)].URL, "-query", r.name, "-source", "events",
			"-sink", sink, "-pipeline", file, "-batch", "20", "-workers", "2", "-wait", "500ms", "-listen", ""}}
		ws = append(ws, w)
		r.workers = append(r.workers, w)
		w.start()
		t.Cleanup(func() {
			w.kill()
			log.Close()
			if t.Failed() {
				out, _ := os.ReadFile(log.Name())
				t.Logf("worker %s %d log (tail):\n%s", sink, i, out[max(0, len(out)-3000):])
			}
		})
	}
	return ws
}

// stopWorkers kills ws and waits until the query's group holds no live
// lease: the drain of an upgrade.
func (r *pipelineRun) stopWorkers(db *celldb.DB, ws []*workerProc) {
	for _, w := range ws {
		w.kill()
	}
	brokertest.Eventually(r.t, 30*time.Second, func() error {
		if n, err := db.Leases(context.Background(), v1.DefaultTenant, r.name, v1.ConsumerGroup(r.name)); err != nil || n != 0 {
			return fmt.Errorf("the stopped workers' leases are not gone (%d, %v)", n, err)
		}
		return nil
	})
}

// waitConsumed waits until the query has consumed n events.
func (r *pipelineRun) waitConsumed(n int64) {
	r.t.Helper()
	brokertest.Eventually(r.t, 90*time.Second, func() error {
		if at := r.consumed(); at < n {
			return fmt.Errorf("the workers have not consumed %d events (at %d)", n, at)
		}
		return nil
	})
}

func TestAnUpgradeThroughASavepointAndARollbackKeepTheSinkExactlyOnce(t *testing.T) {
	const partitions, perPartition = 4, 600
	events := generate(partitions, perPartition, 0, 300)
	first, second := make([][]foldref.Event, partitions), make([][]foldref.Event, partitions)
	for p, evs := range events {
		first[p], second[p] = evs[:perPartition/2], evs[perPartition/2:]
	}
	oldWindow := v1.Window{Type: v1.WindowTumbling, Size: dur(10 * time.Second), IdleFlush: dur(3 * time.Second)}
	newWindow := v1.Window{Type: v1.WindowTumbling, Size: dur(20 * time.Second), IdleFlush: dur(3 * time.Second)}
	oldP, newP := foldref.Pipeline(oldWindow), foldref.Pipeline(newWindow)

	r := newPipelineRun(t, "upgrade", partitions, 1)
	db := celldb.New(r.pool)
	ctx := context.Background()

	// The old pipeline folds the first half of the events.
	r.push(first)
	old := r.startWorkers(oldP, "events.out", 2)
	r.waitConsumed(r.total)
	r.stopWorkers(db, old)
	body, _ := json.Marshal(oldP)
	pipelineText := string(body)
	sp, _, err := db.TakeSavepoint(ctx, v1.DefaultTenant, r.name, v1.ConsumerGroup(r.name), "before", &pipelineText)
	if err != nil {
		t.Fatal(err)
	}
	if sp.StateRows == 0 || sp.Cursors != partitions {
		t.Fatalf("savepoint %+v: want open windows and a cursor on each of the %d partitions", sp, partitions)
	}

	// The upgrade: reset to the new hash, and the new pipeline's workers
	// fold the second half into their own sink.
	if res := r.api.Do(t, "POST", "/streams/v1/queries", "", map[string]any{"name": r.name, "source_queue": "events",
		"sink_queue": "events.v2", "config_hash": newP.ConfigHash(), "reset": true}); res.Status != http.StatusOK {
		t.Fatalf("reset to the new pipeline = %d %s", res.Status, res.Body)
	}
	upgraded := r.startWorkers(newP, "events.v2", 2)
	r.push(second)
	r.waitConsumed(r.total)

	// The rollback.
	r.stopWorkers(db, upgraded)
	rs, err := db.RestoreSavepoint(ctx, v1.DefaultTenant, r.name, v1.ConsumerGroup(r.name), "before", "rollback")
	if err != nil || rs.ConfigHash != oldP.ConfigHash() || rs.Pipeline == nil || *rs.Pipeline != pipelineText {
		t.Fatalf("restore = %+v, %v; want the old pipeline and its hash", rs, err)
	}
	r.startWorkers(oldP, "events.out", 2)
	r.settle()

	want, late := reference(oldWindow, 0, events, nil)
	f := r.checkWindows(want, late)
	emitted := r.checkUpgraded(newWindow, second)
	t.Logf("figures: %d events, savepoint of %d state rows, the old pipeline's %d windows (lost %d, duplicated %d, wrong %d), "+
		"%d windows of the new pipeline before the rollback, %d cycles refused",
		f.events, sp.StateRows, f.windows, f.lost, f.duplicated, f.wrong, emitted, r.refused())
}

// checkUpgraded checks the new pipeline's sink: every window it emitted is
// the reference fold of the events it saw, once. Its last windows were
// open when it stopped, and the rollback discarded them.
func (r *pipelineRun) checkUpgraded(w v1.Window, events [][]foldref.Event) int {
	want, _ := reference(w, 0, events, nil)
	sink := r.drain("events.v2")
	n := 0
	for p := range want {
		name := fmt.Sprintf("p%d", p)
		seen := map[string]bool{}
		for _, raw := range sink[name] {
			var got foldref.Window
			if err := json.Unmarshal(raw, &got); err != nil {
				r.t.Fatalf("sink message %s: %v", raw, err)
			}
			if seen[got.ID()] {
				r.t.Errorf("partition %s: the new pipeline emitted window %s twice", name, got.ID())
			}
			seen[got.ID()] = true
			if ref, ok := want[p][got.ID()]; !ok || ref != got {
				r.t.Errorf("partition %s: the new pipeline's window %s\n got %+v\nwant %+v", name, got.ID(), got, ref)
			}
			n++
		}
	}
	if n == 0 {
		r.t.Error("the new pipeline emitted nothing before the rollback: the upgrade ran no fold")
	}
	return n
}
