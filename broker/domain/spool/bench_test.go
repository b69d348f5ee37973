package spool

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regent-mq/regent/broker/domain/produce"
)

// on is push maintenance, held on: the benchmark only appends.
type on struct{}

func (on) Maintenance() bool { return true }
func (on) Known() bool       { return true }

// BenchmarkAppend appends one item of 100 bytes per call, as a push of one
// item spools it, from a few and from many concurrent callers: with group
// commit, concurrent callers share their fsyncs.
func BenchmarkAppend(b *testing.B) {
	rec := []Record{{Tenant: "default", Item: produce.Item{Queue: "q", Partition: "Default",
		TransactionID: "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f",
		Payload:       json.RawMessage(`{"n":1,"pad":"012345678901234567890123456789012345678901234567890123456789012345678901234"}`)}}}
	for _, p := range []int{1, 32} {
		b.Run(fmt.Sprintf("callers=%d", p*runtime.GOMAXPROCS(0)), func(b *testing.B) {
			s, err := Open(b.TempDir(), nil, nil, on{}, prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"}),
				slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetParallelism(p)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Append(rec); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
