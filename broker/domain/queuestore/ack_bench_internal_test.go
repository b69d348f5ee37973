package queuestore

import (
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/pg/db"

	"encoding/json"
	"fmt"
	"testing"

	"github.com/regent-mq/regent/broker/domain/produce"
)

// BenchmarkAck acknowledges popped batches of 10 by each path: the common
// case (all completed under the lease), the general one (9 completed, then a
// retry) and 10 dead letters. Only the ack is timed.
//
//	go test ./broker/api/queue -run '^$' -bench BenchmarkAck -benchtime 300x
func BenchmarkAck(b *testing.B) {
	for _, path := range []string{"cursor", "each", "deadletters"} {
		b.Run(path, func(b *testing.B) {
			s := newStore(b)
			ctx := b.Context()
			for i := 0; i < 10*b.N+10; i += 10 {
				items := make([]produce.Item, 10)
				for j := range items {
					items[j] = produce.Item{Queue: "q", Payload: json.RawMessage(fmt.Sprint(i + j))}
				}
				if _, err := s.producer.Emit(ctx, produce.Write{Tenant: "default", Items: items}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				got, err := s.Pop(ctx, &PopRequest{Tenant: "default", Queue: "q", Group: catalog.QueueMode,
					Batch: 10, Partitions: 1, SubStart: "all"})
				msgs, lease := got.Messages, got.LeaseID
				if err != nil || len(msgs) != 10 {
					b.Fatalf("pop: %d messages, %v", len(msgs), err)
				}
				acks := make([]db.QueueAck, len(msgs))
				for j, m := range msgs {
					acks[j] = db.QueueAck{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Status: "completed", Group: catalog.QueueMode,
						LeaseID: lease, HasLease: true}
					switch {
					case path == "deadletters":
						acks[j].Status = "dlq"
					case path == "each" && j == len(msgs)-1:
						acks[j].Status = "retry"
					}
				}
				b.StartTimer()
				out, err := s.Ack(ctx, s.db, "default", acks)
				if err != nil || !out[len(out)-1].Success {
					b.Fatalf("ack: %v %+v", err, out)
				}
				b.StopTimer()
				s.after.Apply(Acked("default", acks, out))
				b.StartTimer()
			}
		})
	}
}
