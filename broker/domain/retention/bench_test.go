package retention_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/test/brokertest"
)

// BenchmarkSweeps10kPartitions runs each sweep over a queue of 10,000
// partitions, each holding one young segment and a caught-up cursor, with
// every rule on and nothing to delete: the cost every replica's turn pays
// at each interval once the backlog is gone.
func BenchmarkSweeps10kPartitions(b *testing.B) {
	br := brokertest.Shared(b)
	q := br.Q("q")
	br.Call(b, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q, "options": map[string]any{
		"retentionEnabled": true, "retentionSeconds": 3600, "completedRetentionSeconds": 3600, "maxWaitTimeSeconds": 3600}})
	br.AddPartitions(b, q, 10000)
	if err := br.DB.AtRest(b.Context(), br.Tenant, q, "g"); err != nil {
		b.Fatal(err)
	}
	sw := sweeper(br, time.Hour)
	b.Run("retention", func(b *testing.B) {
		for b.Loop() {
			if _, err := sw.Sweep(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("eviction", func(b *testing.B) {
		for b.Loop() {
			if _, err := sw.Evict(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSweepBacklog1kPartitions runs the retention sweep that takes a
// backlog of 1,000 partitions, each holding one message past
// retentionSeconds: a floor raised and a segment dropped in each.
func BenchmarkSweepBacklog1kPartitions(b *testing.B) {
	br := brokertest.Shared(b)
	old := time.Now().Add(-time.Hour).UnixMicro()
	frames := make([]segment.Frame, 1000)
	for i := range frames {
		frames[i] = segment.Frame{ID: uuid.New(), TransactionID: fmt.Sprint("t", i), CreatedAt: old, Payload: []byte(`{}`)}
	}
	sw := sweeper(br, time.Hour)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		q := br.Q(fmt.Sprint("backlog", i))
		br.Call(b, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q, "options": map[string]any{
			"retentionEnabled": true, "retentionSeconds": 60}})
		if err := br.DB.Spread(b.Context(), br.Tenant, q, frames); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		st, err := sw.Sweep(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if st.Aged != int64(len(frames)) || st.Segments != int64(len(frames)) {
			b.Fatalf("the sweep took %d messages and %d segments, not %d", st.Aged, st.Segments, len(frames))
		}
		br.Call(b, http.StatusOK, "DELETE", "/api/v1/resources/queues/"+q, nil)
		b.StartTimer()
	}
}
