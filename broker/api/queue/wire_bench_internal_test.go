package queue

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/produce"
	"github.com/regent-mq/regent/broker/pg/db"
)

// The measurement that keeps the push answer's hand-written writer: the
// answer to a push of 100 items through encoding/json (the same fields, the
// same names) and through pushResults.append.
//
//	go test ./broker/api/queue -run '^$' -bench BenchmarkPushAnswer -benchmem
func BenchmarkPushAnswer(b *testing.B) {
	part := &catalog.Partition{ID: uuid.New(), Name: "Default", Queue: &catalog.Queue{Name: "orders"}}
	in := make([]produce.Item, 100)
	pushed := make([]produce.Pushed, 100)
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
		pushed[i] = produce.Pushed{MessageID: id, TransactionID: id.String(), Partition: part}
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

// The measurement behind httpx.DecodeJSON's decoder: the body Queen's
// JavaScript client sends for a push of 100 items (a UUIDv7 transactionId on
// each), decoded into the push route's wire type by encoding/json and by
// httpx.DecodeJSON.
//
//	go test ./broker/api/queue -run '^$' -bench BenchmarkDecodePush -benchmem
func BenchmarkDecodePush(b *testing.B) {
	var body strings.Builder
	body.WriteString(`{"items":[`)
	for i := range 100 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"queue":"orders","partition":"p-3","payload":{"n":%d,"note":"a message of about sixty-four bytes"},"transactionId":%q}`,
			i, uuid.Must(uuid.NewV7()).String())
	}
	body.WriteString(`]}`)
	in := []byte(body.String())
	type wire struct {
		Items *[]pushItem `json:"items"`
	}
	for _, d := range []struct {
		name   string
		decode func([]byte, any) error
	}{{"encoding-json", json.Unmarshal}, {"DecodeJSON", httpx.DecodeJSON}} {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				var w wire
				if err := d.decode(in, &w); err != nil || len(*w.Items) != 100 {
					b.Fatalf("decode: %v", err)
				}
			}
		})
	}
}

// The measurement that keeps the ack answer's hand-written writer: the
// answer to an ack of 100 items through encoding/json and appendAcks.
//
//	go test ./broker/api/queue -run '^$' -bench BenchmarkAckAnswer -benchmem
func BenchmarkAckAnswer(b *testing.B) {
	queue, partition := "orders", "p-3"
	out := make([]db.AckResult, 100)
	for i := range out {
		out[i] = db.AckResult{Index: i, TransactionID: uuid.Must(uuid.NewV7()).String(), Success: true,
			QueueName: &queue, PartitionName: &partition, LeaseReleased: i == 99}
	}
	if got, want := appendAcks(nil, out), must(json.Marshal(out)); string(got) != string(want) {
		b.Fatalf("the two answers differ:\n%s\n%s", got, want)
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 16<<10)
		for b.Loop() {
			buf = appendAcks(buf[:0], out)
		}
	})
}

// The measurement behind wireAck's plain strings: the body of an ack of
// 100 items, as regent-bench and Queen's clients send it, decoded and
// parsed as handleAckBatch does.
//
//	go test ./broker/api/queue -run '^$' -bench BenchmarkDecodeAckBatch -benchmem
func BenchmarkDecodeAckBatch(b *testing.B) {
	var body strings.Builder
	pid, lease := uuid.New(), uuid.New()
	body.WriteString(`{"acknowledgments":[`)
	for i := range 100 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"transactionId":%q,"partitionId":%q,"leaseId":%q,"status":"completed"}`,
			uuid.Must(uuid.NewV7()).String(), pid.String(), lease.String())
	}
	body.WriteString(`],"consumerGroup":"__QUEUE_MODE__"}`)
	in := []byte(body.String())
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		var w struct {
			Acks *[]wireAck `json:"acknowledgments"`
		}
		if err := httpx.DecodeJSON(in, &w); err != nil {
			b.Fatal(err)
		}
		for i := range *w.Acks {
			if _, err := (*w.Acks)[i].parse(catalog.QueueMode); err != nil {
				b.Fatal(err)
			}
		}
	}
}
