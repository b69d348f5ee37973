package cluster_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/foldref"
)

// The table sink's kill tests: the tumbling run above, its windows written
// by the cycles into a table beside the sink queue, while three workers and
// two brokers are SIGKILLed in turn. The table must hold every window of
// the reference fold once, with its exact values, and no other row; and
// the cycles must have written each once (sink_writes): in mode append a
// window written twice is a second row, in mode upsert it is a second
// write of the same row.

// tableRow is a row of the run's table: a window of a source partition.
type tableRow struct {
	Partition string `json:"partition"`
	foldref.Window
}

// windowsProject writes what foldref.Window reads back, and the partition:
// a window's key and start name it only within its source partition.
const windowsProject = `{'partition': partition, 'key': key, 'windowStart': windowStart, 'windowEnd': windowEnd,
  'orders': orders, 'revenue': revenue, 'low': low, 'high': high, 'mean': mean, 'first': first, 'last': last}`

func TestATableSinkHoldsEveryWindowOnceWhileWorkersAndBrokersAreKilled(t *testing.T) {
	tableSinkRun(t, "append", nil)
}

func TestAnUpsertTableSinkWritesEveryWindowOnceWhileWorkersAndBrokersAreKilled(t *testing.T) {
	tableSinkRun(t, "upsert", []string{"partition", "key", "windowStart"})
}

func tableSinkRun(t *testing.T, mode string, keys []string) {
	partitions, perPartition, kills := runSize()
	w := v1.Window{Type: v1.WindowTumbling, Size: dur(10 * time.Second), AllowedLateness: dur(2 * time.Second),
		IdleFlush: dur(3 * time.Second)}
	events := generate(partitions, perPartition, 40, 300)
	p := foldref.Pipeline(w)
	p.Late, p.Project = lateQueue, windowsProject

	name, table := "tabled-"+mode, "windows_"+mode
	r := newPipelineRun(t, name, partitions, 2)
	r.pipeline, r.events = p, events
	// As the operator does for createTable, then registers the sink.
	text, float, integer := "text", "double precision", "bigint"
	cols := []celldb.SinkColumn{{Name: "partition", Type: text}, {Name: "key", Type: text}, {Name: "windowStart", Type: text},
		{Name: "windowEnd", Type: text}, {Name: "orders", Type: integer}, {Name: "revenue", Type: float}, {Name: "low", Type: float},
		{Name: "high", Type: float}, {Name: "mean", Type: float}, {Name: "first", Type: integer}, {Name: "last", Type: integer}}
	if _, err := celldb.New(r.pool).CreateSinkTable(t.Context(), v1.DefaultTenant, table, cols, keys); err != nil {
		t.Fatal(err)
	}
	if res := r.api.Do(t, "POST", "/streams/v1/queries", "", map[string]any{"name": name, "source_queue": "events",
		"sink_queue": "events.out", "config_hash": p.ConfigHash(), "sink_table": map[string]any{"table": table, "key_columns": keys, "mode": mode}}); res.Status != http.StatusOK {
		t.Fatalf("register = %d %s", res.Status, res.Body)
	}
	r.push(events)
	r.startWorkers(p, "events.out", pipelineWorkers)
	midRun := r.kill(kills)
	r.settle()

	want, late := reference(w, 0, events, nil)
	db := dbtest.New(r.pool)
	rows, err := db.TableRows(t.Context(), v1.DefaultTenant, table)
	if err != nil {
		t.Fatal(err)
	}
	var lost, duplicated, wrong, windows int
	got := map[string]foldref.Window{}
	for _, raw := range rows {
		var row tableRow
		if err := json.Unmarshal([]byte(raw), &row); err != nil {
			t.Fatalf("row %s: %v", raw, err)
		}
		id := row.Partition + "/" + row.ID()
		if _, twice := got[id]; twice {
			duplicated++
			t.Errorf("window %s is in the table twice", id)
		}
		got[id] = row.Window
	}
	for part := range want {
		for id, win := range want[part] {
			windows++
			g, ok := got[fmt.Sprintf("p%d/%s", part, id)]
			switch {
			case !ok:
				lost++
				t.Errorf("window p%d/%s is not in the table", part, id)
			case g != win:
				wrong++
				t.Errorf("window p%d/%s\n got %+v\nwant %+v", part, id, g, win)
			}
		}
	}
	if extra := len(rows) - windows + lost; extra != duplicated {
		wrong += extra - duplicated
		t.Errorf("the table holds %d rows for %d windows (%d lost, %d twice)", len(rows), windows, lost, duplicated)
	}
	written, err := db.SinkWrites(t.Context(), r.api.Query(t, "", name).ID)
	if err != nil {
		t.Fatal(err)
	}
	if written.Rows != int64(windows) {
		t.Errorf("the cycles recorded %d rows written for %d windows", written.Rows, windows)
	}
	// The sink queue, written by the same cycles, holds the same windows.
	f := r.checkWindows(want, late)
	t.Logf("figures (mode %s): %d kills (%d mid-run), %d events, %d windows in the table, %d rows written, %d late, %d cycles refused; "+
		"table: lost %d, duplicated %d, wrong %d; sink queue: lost %d, duplicated %d, wrong %d",
		mode, kills, midRun, r.total, len(rows), written.Rows, f.late, r.refused(), lost, duplicated, wrong, f.lost, f.duplicated, f.wrong)
}
