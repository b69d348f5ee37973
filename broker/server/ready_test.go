package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestReadyIsReadyWhenPostgresAnswersWithTheSchemaMigrated(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	r := b.Do(t, "GET", "/ready", "", nil)
	if r.Status != http.StatusOK || r.Map(t)["status"] != "ready" {
		t.Fatalf("ready = %d %s", r.Status, r.Body)
	}
}

func TestReadyFailsWhilePostgresIsUnreachable(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	cutOff(t, b)
	r := b.Do(t, "GET", "/ready", "", nil)
	if r.Status != http.StatusServiceUnavailable || r.Map(t)["reason"] != "database unreachable" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("ready = %d %v %s, want 503 with Retry-After", r.Status, r.Header, r.Body)
	}
}

// A broker started with --migrate=false before the migration job has run
// must get no traffic: its statements would fail on a schema they predate.
func TestReadyFailsWhileTheSchemaLacksAMigration(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	ctx := context.Background()
	var latest int
	if err := b.Pool.QueryRow(ctx, "DELETE FROM public.regent_schema_migrations WHERE version = (SELECT max(version) FROM public.regent_schema_migrations) RETURNING version").Scan(&latest); err != nil {
		t.Fatal(err)
	}
	r := b.Do(t, "GET", "/ready", "", nil)
	if r.Status != http.StatusServiceUnavailable || r.Map(t)["reason"] != "schema not migrated" {
		t.Fatalf("ready with migration %d missing = %d %s", latest, r.Status, r.Body)
	}
	if h := b.Do(t, "GET", "/health", "", nil); h.Status != http.StatusOK {
		t.Errorf("health = %d %s: liveness does not depend on the schema", h.Status, h.Body)
	}
	if _, err := b.Pool.Exec(ctx, "DROP TABLE public.regent_schema_migrations CASCADE"); err != nil {
		t.Fatal(err)
	}
	if r := b.Do(t, "GET", "/ready", "", nil); r.Status != http.StatusServiceUnavailable || r.Map(t)["reason"] != "schema not migrated" {
		t.Fatalf("ready on a database never migrated = %d %s", r.Status, r.Body)
	}
}

// On SIGTERM /ready fails at once, so that the endpoints drop the replica,
// while the listener keeps serving everything else for the drain grace.
func TestReadyFailsAtOnceOnStopWhileTheListenerServesOnForTheDrainGrace(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *config.Config) { c.DrainGrace = 3 * time.Second })
	stopped := make(chan struct{})
	go func() {
		b.Stop()
		close(stopped)
	}()
	r := b.Do(t, "GET", "/ready", "", nil)
	for deadline := time.Now().Add(2 * time.Second); r.Status == http.StatusOK && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r = b.Do(t, "GET", "/ready", "", nil)
	}
	if r.Status != http.StatusServiceUnavailable || r.Map(t)["reason"] != "draining" {
		t.Fatalf("ready after the stop = %d %s, want 503 draining", r.Status, r.Body)
	}
	select {
	case <-stopped:
		t.Fatal("the broker stopped before its drain grace was over")
	default:
	}
	if h := b.Do(t, "GET", "/health", "", nil); h.Status != http.StatusOK {
		t.Errorf("health while draining = %d %s", h.Status, h.Body)
	}
	push := map[string]any{"items": []map[string]any{{"queue": "draining", "payload": 1}}}
	// Closing each connection sends the client's next request through
	// the Service to a replica still ready.
	if p := b.Do(t, "POST", "/api/v1/push", "", push); p.Status != http.StatusCreated || !p.Close {
		t.Errorf("a push while draining = %d %s, connection closed: %v; want it served, and its connection closed", p.Status, p.Body, p.Close)
	}
	<-stopped
}
