package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestReadyIsReadyWhenPostgresAnswersWithTheSchemaMigrated(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	r := b.Do(t, "GET", "/ready", "", nil)
	if r.Status != http.StatusOK || r.Map(t)["status"] != "ready" {
		t.Fatalf("ready = %d %s", r.Status, r.Body)
	}
}

// A broker started with --migrate=false before the migration job has run
// must get no traffic: its statements would fail on a schema they predate.
func TestReadyFailsWhileTheSchemaLacksAMigration(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t) // its schema is taken back
	latest, err := b.DB.ForgetLatestMigration(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := b.Do(t, "GET", "/ready", "", nil)
	if r.Status != http.StatusServiceUnavailable || r.Map(t)["reason"] != "schema not migrated" {
		t.Fatalf("ready with migration %d missing = %d %s", latest, r.Status, r.Body)
	}
	if h := b.Do(t, "GET", "/health", "", nil); h.Status != http.StatusOK {
		t.Errorf("health = %d %s: liveness does not depend on the schema", h.Status, h.Body)
	}
	if err := b.DB.ForgetMigrations(t.Context()); err != nil {
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
	b := brokertest.Start(t, func(c *config.Config) { c.DrainGrace = 3 * time.Second }) // it is stopped
	stopped := make(chan struct{})
	go func() {
		b.Stop()
		close(stopped)
	}()
	brokertest.Eventually(t, 2*time.Second, func() error {
		if r := b.Do(t, "GET", "/ready", "", nil); r.Status != http.StatusServiceUnavailable || r.Map(t)["reason"] != "draining" {
			return fmt.Errorf("ready after the stop = %d %s, want 503 draining", r.Status, r.Body)
		}
		return nil
	})
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
