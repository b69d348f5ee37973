package streams

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/api/streams/wire"

	"github.com/google/uuid"
)

func TestCycleAnswerIsWrittenAsEncodingJSONWritesIt(t *testing.T) {
	name, offset, id := "orders <&> \u2028 \"q\"", int64(4711), uuid.New()
	for _, r := range []cycleResponse{
		{QueryID: uuid.New(), PartitionID: uuid.New(), Error: "query not found", PushResults: []wire.PushResult{}},
		{QueryID: uuid.New(), PartitionID: uuid.New(), Error: "invalid lease: \x01 \xff"},
		{Success: true, QueryID: uuid.New(), PartitionID: uuid.New(), QueueName: &name, StateOpsApplied: 3,
			PushResults: []wire.PushResult{
				{Queue: "out", Partition: "Default", Status: "queued", BaseOffset: &offset, MessageID: &id, TransactionID: "t1"},
				{Status: "skipped"},
				{Queue: "out", Partition: "p", Status: "duplicate", MessageID: &id, TransactionID: "t\n2"},
			},
			AckResult: &wire.AckResult{Success: true, Count: 50, LeaseReleased: true}},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.appendJSON(nil); string(got) != string(want) {
			t.Errorf("answer\n%s\nwant\n%s", got, want)
		}
	}
}

// The measurement that keeps the cycle answer's hand-written writer: the
// same answer through encoding/json and through appendJSON.
//
//	go test ./broker/api/streams -run '^$' -bench BenchmarkCycleAnswer -benchmem
func BenchmarkCycleAnswer(b *testing.B) {
	name, offset, id := "orders", int64(4711), uuid.New()
	r := cycleResponse{Success: true, QueryID: uuid.New(), PartitionID: uuid.New(), QueueName: &name, StateOpsApplied: 4,
		PushResults: []wire.PushResult{{Queue: "orders.per_minute", Partition: "Default", Status: "queued", BaseOffset: &offset,
			MessageID: &id, TransactionID: id.String()}},
		AckResult: &wire.AckResult{Success: true, Count: 100, LeaseReleased: true}}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf = r.appendJSON(buf[:0])
		}
	})
}

// The measurement that keeps the state read's hand-written rows: 64 rows
// through encoding/json (values as json.RawMessage, which it validates and
// compacts again) and through appendStateRow.
//
//	go test ./broker/api/streams -run '^$' -bench BenchmarkStateAnswer -benchmem
func BenchmarkStateAnswer(b *testing.B) {
	type row struct {
		Key       string          `json:"key"`
		Value     json.RawMessage `json:"value"`
		UpdatedAt string          `json:"updated_at"`
	}
	at := time.Date(2026, 12, 1, 10, 1, 2, 123456000, time.UTC)
	rows := make([]row, 64)
	for i := range rows {
		rows[i] = row{Key: fmt.Sprintf("tumb:60\u001f2026-08-17T10:%02d:00.000Z\u001facme", i),
			Value: json.RawMessage(`{"acc": 41, "windowEnd": 1755424920000}`), UpdatedAt: at.Format(httpx.TimeFormat)}
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(rows); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 16<<10)
		for b.Loop() {
			buf = append(buf[:0], '[')
			for i := range rows {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendStateRow(buf, rows[i].Key, rows[i].Value, at)
			}
			buf = append(buf, ']')
		}
	})
}
