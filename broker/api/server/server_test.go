package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

func TestHealthIsHealthyWhenPostgresAnswers(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	r := b.Do(t, "GET", "/health", "", nil)
	m := r.Map(t)
	if r.Status != http.StatusOK || m["status"] != "healthy" || m["database"] != "connected" || m["version"] == "" {
		t.Fatalf("health = %d %s", r.Status, r.Body)
	}
}

// TestWhilePostgresIsUnreachable has the package's one broker whose
// database is taken away.
func TestWhilePostgresIsUnreachable(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	pgtest.CutOff(t, b.DatabaseURL)
	b.Pool.Close()
	t.Run("HealthIsUnhealthy", func(t *testing.T) {
		r := b.Do(t, "GET", "/health", "", nil)
		if r.Status != http.StatusServiceUnavailable || r.Map(t)["status"] != "unhealthy" {
			t.Fatalf("health = %d %s", r.Status, r.Body)
		}
		if m := b.Scrape(t); !strings.Contains(m, "\nregent_database_up 0\n") {
			t.Fatalf("the failed health check left regent_database_up at:\n%s", m)
		}
	})
	t.Run("ReadyFails", func(t *testing.T) {
		r := b.Do(t, "GET", "/ready", "", nil)
		if r.Status != http.StatusServiceUnavailable || r.Map(t)["reason"] != "database unreachable" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("ready = %d %v %s, want 503 with Retry-After", r.Status, r.Header, r.Body)
		}
	})
}

func TestMetricsAreServedOnBothPaths(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.Do(t, "GET", "/health", "", nil)
	for _, p := range []string{"/metrics", "/metrics/prometheus"} {
		r := brokertest.At(b.MetricsURL).Do(t, "GET", p, "", nil)
		body := string(r.Body)
		if r.Status != 200 || !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "process_") ||
			!strings.Contains(body, `regent_http_request_duration_seconds_count{code="200",method="GET",route="GET /health"}`) {
			t.Fatalf("%s = %d, missing collectors:\n%.2000s", p, r.Status, body)
		}
	}
}

func TestOptionsOnAnyPathIs204WithCORS(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	r := b.Do(t, "OPTIONS", "/api/v1/anything", "", nil)
	if r.Status != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != "*" || len(r.Body) != 0 {
		t.Fatalf("OPTIONS = %d %v %q", r.Status, r.Header, r.Body)
	}
	r = b.Do(t, "GET", "/health", "", nil)
	if r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatal("GET lacks Access-Control-Allow-Origin")
	}
}

func TestUnknownRouteIsJSON404(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	r := b.Do(t, "GET", "/nope", "", nil)
	if r.Status != http.StatusNotFound || r.Map(t)["error"] == nil {
		t.Fatalf("GET /nope = %d %s", r.Status, r.Body)
	}
}

// A path that is served for other methods is a 405 naming them in Allow, as
// HTTP says (RFC 9110, 15.5.6), not a 404: GET on the push route tells the
// caller to POST.
func TestAWrongMethodOnARouteIs405WithAllow(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	for path, allow := range map[string]string{
		"/api/v1/push":          "POST",
		"/streams/v1/cycle":     "POST",
		"/streams/v1/state/get": "POST",
		"/streams/v1/queries":   "GET, HEAD, POST",
		"/api/v1/pop/queue/q":   "GET, HEAD",
	} {
		r := b.Do(t, "PUT", path, "", nil)
		if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != allow {
			t.Errorf("PUT %s = %d, Allow %q, want 405 with Allow %q: %s", path, r.Status, r.Header.Get("Allow"), allow, r.Body)
			continue
		}
		if msg, _ := r.Map(t)["error"].(string); !strings.Contains(msg, allow) {
			t.Errorf("PUT %s: the error %q does not name the allowed methods", path, msg)
		}
	}
	if r := b.Do(t, "GET", "/api/v1/push", "", nil); r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "POST" {
		t.Errorf("GET /api/v1/push = %d, Allow %q, want 405 with Allow POST", r.Status, r.Header.Get("Allow"))
	}
}
