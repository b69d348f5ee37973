package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/nettest"
)

// A database that cannot be reached is not the broker's fault and passes:
// every route that needs it answers 503 with Retry-After and a JSON error,
// never a 500, and /health says so too.
func TestAnUnreachableDatabaseIs503WithRetryAfter(t *testing.T) {
	t.Parallel()
	down := nettest.Refusing(t)
	b := brokertest.StartOn(t, "postgres://postgres@"+down.Addr+"/regent?sslmode=disable&connect_timeout=2",
		func(c *config.Config) { c.Migrate = false })
	id := "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/health", nil},
		{"POST", "/api/v1/configure", map[string]any{"queue": "q"}},
		{"POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "payload": 1}}}},
		{"GET", "/api/v1/pop/queue/q", nil},
		{"POST", "/api/v1/ack", map[string]any{"transactionId": "t", "partitionId": id}},
		{"GET", "/api/v1/dlq", nil},
		{"POST", "/streams/v1/queries", map[string]any{"name": "n", "source_queue": "q", "config_hash": "h"}},
		{"POST", "/streams/v1/state/get", map[string]any{"query_id": id, "partition_id": id}},
		{"POST", "/streams/v1/cycle", map[string]any{"query_id": id, "partition_id": id}},
	} {
		r := b.Do(t, c.method, c.path, b.Token, c.body)
		if r.Status != http.StatusServiceUnavailable {
			t.Errorf("%s %s with the database down: %d %s, want 503", c.method, c.path, r.Status, r.Body)
			continue
		}
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", c.method, c.path)
		}
		if !strings.HasPrefix(strings.TrimSpace(string(r.Body)), "{") {
			t.Errorf("%s %s: 503 body %q is not JSON", c.method, c.path, r.Body)
		}
	}
}
