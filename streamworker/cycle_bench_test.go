package streamworker

import (
	"encoding/json"
	"fmt"
	"testing"

	gojson "github.com/goccy/go-json"

	"github.com/regent-mq/regent/pipeline"
)

// BenchmarkCycleBody encodes the cycle body of a batch of 100 events over
// as many windows, with the client's encoder (goccy/go-json), the state
// ops included.
func BenchmarkCycleBody(b *testing.B) {
	w := &Worker{queryID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5d", group: "streams.q"}
	p := &partition{id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", name: "p0"}
	ops := make([]pipeline.StateOp, 100)
	for i := range ops {
		ops[i] = pipeline.StateOp{Type: "upsert", Key: fmt.Sprintf("pl\u001f2026-08-17T10:00:00.000Z\u001fk%d", i),
			Value:       json.RawMessage(fmt.Sprintf(`{"key":"k%d","windowStart":1786960800000,"windowEnd":1786964400000,"aggs":[{"n":%d},{"n":%d,"v":%d}]}`, i, i, i, i*7)),
			IfUpdatedAt: "2026-08-17T10:00:00.123456Z"}
	}
	b.ReportAllocs()
	for b.Loop() {
		body, err := w.cycleBody(p, ops, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := gojson.Marshal(body); err != nil {
			b.Fatal(err)
		}
	}
}
