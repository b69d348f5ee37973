package retention_test

import (
	"net/http"
	"testing"
	"time"

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
