package admin_test

import (
	"net/http"
	"testing"
	"time"
)

// BenchmarkReadRoutes10kPartitions reads the consumer-group, resources,
// status and messages routes over one queue of 10,000 partitions, each with
// a one-message segment of about two hours ago, and two groups with a cursor on
// every partition: one caught up, one with the message to go.
func BenchmarkReadRoutes10kPartitions(b *testing.B) {
	br := start(b) // a database that holds only what it arranges, as make bench has measured
	br.Call(b, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "q"})
	// Partition p-i's message was pushed i milliseconds before the newest.
	newest := time.Now().Add(-2 * time.Hour)
	must(b, br.DB.Spread(b.Context(), br.Tenant, "q", spread(10000, "t", func(i int) time.Time {
		return newest.Add(-time.Duration(i) * time.Millisecond)
	})))
	must(b, br.DB.PlaceCursors(b.Context(), br.Tenant, "q", "done", 1))
	must(b, br.DB.PlaceCursors(b.Context(), br.Tenant, "q", "behind", 0))
	must(b, br.DB.Analyze(b.Context()))
	window := "from=" + newest.Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, path := range []string{"/api/v1/consumer-groups", "/api/v1/consumer-groups/lagging?minLagSeconds=3600",
		"/api/v1/consumer-groups/behind",
		"/api/v1/resources/overview", "/api/v1/resources/queues", "/api/v1/resources/queues/q", "/api/v1/resources/namespaces",
		"/api/v1/status", "/api/v1/status/queues", "/api/v1/status/queues/q",
		"/api/v1/messages?" + window, "/api/v1/status/queues/q/messages"} {
		b.Run(path, func(b *testing.B) { benchGet(b, br, path) })
	}
}
