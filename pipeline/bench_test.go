package pipeline

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// BenchmarkFoldTumblingCountSumAvg10kKeys is one worker core folding in
// memory: a tumbling minute with count, sum and avg, keyed over 10,000
// keys, events decoded from JSON and every expression evaluated. make bench
// reports its events/s (goal: 200,000).
func BenchmarkFoldTumblingCountSumAvg10kKeys(b *testing.B) {
	p, err := Compile(v1.Pipeline{KeyBy: "payload.customer", EventTime: "payload.ts",
		Window: &v1.Window{Type: v1.WindowTumbling, Size: dur(time.Minute)},
		Aggregate: []v1.Aggregate{{Name: "orders", Fn: v1.FnCount}, {Name: "revenue", Fn: v1.FnSum, Of: "payload.amount"},
			{Name: "average", Fn: v1.FnAvg, Of: "payload.amount"}}})
	if err != nil {
		b.Fatal(err)
	}
	const n = 100_000
	events := benchEvents(n, func(i int, base int64) string {
		return fmt.Sprintf(`{"customer":"c%d","amount":%d,"ts":%d,"note":"order %d"}`, (i*7919)%10_000, i%500, base+int64(i)*3, i)
	})
	s := benchShard(b, p)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % (n / 100) * 100
		s.Fold(events[j : j+100])
	}
	b.StopTimer()
	if s.Failed > 0 {
		b.Fatal(s.Errors)
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkKeptShardBatchOf100Over1000Keys is the loop of a worker that
// keeps its partition's lease: a batch of 100 events over 1,000 keys
// folded into the shard held since the last cycle, its Commit, and
// Committed; the shard holds an open window for each key.
func BenchmarkKeptShardBatchOf100Over1000Keys(b *testing.B) {
	p, err := Compile(v1.Pipeline{KeyBy: "payload.key", EventTime: "payload.ts",
		Window:    &v1.Window{Type: v1.WindowTumbling, Size: dur(time.Hour)},
		Aggregate: []v1.Aggregate{{Name: "n", Fn: v1.FnCount}, {Name: "sum", Fn: v1.FnSum, Of: "payload.amount"}}})
	if err != nil {
		b.Fatal(err)
	}
	const n = 100_000
	events := benchEvents(n, func(i int, base int64) string {
		return fmt.Sprintf(`{"key":"k%d","amount":%d,"ts":%d}`, (i*7919)%1_000, i%500, base+int64(i%1000))
	})
	s := benchShard(b, p)
	now := time.Now()
	s.Fold(events[:n])
	if _, _, err := s.Commit(&now); err != nil {
		b.Fatal(err)
	}
	s.Committed("2026-08-17T10:00:00.000000Z")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % (n / 100) * 100
		s.Fold(events[j : j+100])
		if _, _, err := s.Commit(&now); err != nil {
			b.Fatal(err)
		}
		s.Committed("2026-08-17T10:00:00.000000Z")
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "events/s")
}

// benchEvents is n events whose payloads data makes from their index and a
// base event time.
func benchEvents(n int, data func(i int, base int64) string) []Event {
	events := make([]Event, n)
	base := time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC).UnixMilli()
	for i := range events {
		events[i] = Event{Data: json.RawMessage(data(i, base)), TransactionID: fmt.Sprint(i)}
	}
	return events
}

func benchShard(b *testing.B, p *Program) *Shard {
	s, err := p.NewShard(Scope{QueryID: "q", PartitionID: "p", Partition: "p0", Sink: "out"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
