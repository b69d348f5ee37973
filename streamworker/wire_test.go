package streamworker

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	gojson "github.com/goccy/go-json"

	"github.com/regent-mq/regent/broker/api/streams/wire"
	"github.com/regent-mq/regent/pipeline"
)

// mapBody is the cycle body as the worker built it before the wire types,
// a map[string]any: the reference that cycleBody must keep to, since stock
// clients share the route and the broker reads both.
func mapBody(w *Worker, p *partition, ops []pipeline.StateOp, pushes []pipeline.Push, ack map[string]any) map[string]any {
	if ops == nil {
		ops = []pipeline.StateOp{}
	}
	if pushes == nil {
		pushes = []pipeline.Push{}
	}
	return map[string]any{"query_id": w.queryID, "partition_id": p.id, "consumer_group": w.group,
		"state_ops": ops, "push_items": pushes, "ack": ack, "reset_generation": w.generation}
}

// decoded is a JSON document as values, its numbers as they were written.
func decoded(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestTheCycleBodyIsTheJSONTheWorkerSentAsAMap(t *testing.T) {
	gen := int64(7)
	p := &partition{id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", name: "p<&>"}
	ops := []pipeline.StateOp{
		{Type: "upsert", Key: "w\u2028<k>", Value: json.RawMessage(`{"aggs": [{"n": 2}], "at": 1.5e3}`), IfUpdatedAt: "2026-12-07T05:00:00.123456Z"},
		{Type: "upsert", Key: "clock", Value: json.RawMessage(`{"watermark":2000}`)},
		{Type: "delete", Key: "old & done", IfUpdatedAt: "2026-12-07T04:59:59Z"},
	}
	pushes := []pipeline.Push{
		{Queue: "out", Partition: "Default", Payload: json.RawMessage(`{"key":"a","n":2,"big":12345678901234567890}`), TransactionID: "q:p:w1"},
		{Queue: "out", Partition: "", Payload: nil, TransactionID: ""},
	}
	for _, c := range []struct {
		name       string
		generation *int64
		ops        []pipeline.StateOp
		pushes     []pipeline.Push
		lease      string
		n          int
	}{
		{name: "fold", generation: &gen, ops: ops, pushes: pushes, lease: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", n: 10},
		{name: "fold of a broker that sent no generation", ops: ops[:1], lease: "l", n: 1},
		{name: "flush", generation: &gen, ops: ops[1:], pushes: pushes[:1]},
		{name: "empty flush"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &Worker{queryID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5d", group: "streams.q", generation: c.generation}
			var ack *wire.CycleAck
			var ackMap map[string]any
			if c.lease != "" {
				completed, count := "completed", int64(c.n)
				ack = &wire.CycleAck{LeaseID: c.lease, TransactionID: "tx-last", Status: &completed, Count: &count}
				ackMap = map[string]any{"leaseId": c.lease, "transactionId": "tx-last", "status": "completed", "count": c.n}
			}
			body, err := w.cycleBody(p, c.ops, c.pushes, ack)
			if err != nil {
				t.Fatal(err)
			}
			// The client's encoder, for both.
			got, err := gojson.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			want, err := gojson.Marshal(mapBody(w, p, c.ops, c.pushes, ackMap))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(decoded(t, got), decoded(t, want)) {
				t.Errorf("cycle body\n%s\nwant the map's\n%s", got, want)
			}
		})
	}
}

func TestAWorkerOfATableSinkSendsItsOutputsAsTableRowsAndNoLateEvent(t *testing.T) {
	p := &partition{id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", name: "Default"}
	pushes := []pipeline.Push{
		{Queue: "", Partition: "Default", Payload: json.RawMessage(`{"key":"a","count":2}`), TransactionID: "w1", Output: true},
		{Queue: "late", Partition: "Default", Payload: json.RawMessage(`{"ts":1}`), TransactionID: "l1"},
		{Queue: "", Partition: "Default", Payload: json.RawMessage(`{"key":"b","count":1}`), TransactionID: "w2", Output: true},
	}
	for _, c := range []struct {
		table     bool
		rows      string
		pushItems int
	}{{table: true, rows: `[{"key":"a","count":2},{"key":"b","count":1}]`, pushItems: 1}, {table: false, pushItems: 1}} {
		w := &Worker{queryID: "q", group: "streams.q", table: c.table}
		body, err := w.cycleBody(p, nil, pushes, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(body.TableRows) != c.rows || len(body.PushItems) != c.pushItems {
			t.Fatalf("table sink %v: table_rows %s and %d push items, want %s and %d (the late queue's; an output without a sink queue is no push)",
				c.table, body.TableRows, len(body.PushItems), c.rows, c.pushItems)
		}
		raw, err := gojson.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		if has := bytes.Contains(raw, []byte(`"table_rows"`)); has != c.table {
			t.Fatalf("table sink %v: the body %s has table_rows %v", c.table, raw, has)
		}
	}
}
