package streams

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
)

func TestCycleAnswerIsWrittenAsEncodingJSONWritesIt(t *testing.T) {
	name, offset, id := "orders <&> \u2028 \"q\"", int64(4711), uuid.New()
	for _, r := range []cycleResponse{
		{QueryID: uuid.New(), PartitionID: uuid.New(), Error: "query not found", PushResults: []pushResult{}},
		{QueryID: uuid.New(), PartitionID: uuid.New(), Error: "invalid lease: \x01 \xff"},
		{Success: true, QueryID: uuid.New(), PartitionID: uuid.New(), QueueName: &name, StateOpsApplied: 3,
			PushResults: []pushResult{
				{Queue: "out", Partition: "Default", Status: "queued", BaseOffset: &offset, MessageID: &id, TransactionID: "t1"},
				{Status: "skipped"},
				{Queue: "out", Partition: "p", Status: "duplicate", MessageID: &id, TransactionID: "t\n2"},
			},
			AckResult: &ackResult{Success: true, Count: 50, LeaseReleased: true}},
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
//	go test ./broker/streams -run '^$' -bench BenchmarkCycleAnswer -benchmem
func BenchmarkCycleAnswer(b *testing.B) {
	name, offset, id := "orders", int64(4711), uuid.New()
	r := cycleResponse{Success: true, QueryID: uuid.New(), PartitionID: uuid.New(), QueueName: &name, StateOpsApplied: 4,
		PushResults: []pushResult{{Queue: "orders.per_minute", Partition: "Default", Status: "queued", BaseOffset: &offset,
			MessageID: &id, TransactionID: id.String()}},
		AckResult: &ackResult{Success: true, Count: 100, LeaseReleased: true}}
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
