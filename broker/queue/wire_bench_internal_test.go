package queue

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/log"
)

// The measurement that keeps the push answer's hand-written writer: the
// answer to a push of 100 items through encoding/json (the same fields, the
// same names) and through pushResults.append.
//
//	go test ./broker/queue -run '^$' -bench BenchmarkPushAnswer -benchmem
func BenchmarkPushAnswer(b *testing.B) {
	part := &log.Partition{ID: uuid.New(), Name: "Default", Queue: &log.Queue{Name: "orders"}}
	in := make([]log.Item, 100)
	pushed := make([]log.Pushed, 100)
	type wire struct {
		Index         int       `json:"index"`
		TransactionID string    `json:"transaction_id"`
		MessageID     uuid.UUID `json:"message_id"`
		PartitionID   uuid.UUID `json:"partition_id"`
		TraceID       *string   `json:"trace_id"`
		QueueName     string    `json:"queueName"`
		Status        string    `json:"status"`
	}
	same := make([]wire, 100)
	for i := range pushed {
		id := uuid.New()
		pushed[i] = log.Pushed{MessageID: id, TransactionID: id.String(), Partition: part}
		same[i] = wire{Index: i, TransactionID: id.String(), MessageID: id, PartitionID: part.ID, QueueName: "orders", Status: "queued"}
	}
	r := pushResults{in, pushed}
	if got, want := r.append(nil), must(json.Marshal(same)); string(got) != string(want) {
		b.Fatalf("the two answers differ:\n%s\n%s", got, want)
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(same); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 16<<10)
		for b.Loop() {
			buf = r.append(buf[:0])
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
