package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
)

// A pod told to stop gets SIGTERM while requests are in flight (the
// Service has already stopped sending it new ones). Each must still be
// answered: a push that was cancelled instead was answered an empty 200,
// whether it was stored or not, which a rolling upgrade of the chart on a
// real cluster showed. The push here waits on a row lock held by the test
// when the broker begins to stop, and is answered once the lock goes.
func TestAPushInFlightWhenTheBrokerStopsIsAnswered(t *testing.T) {
	b := brokertest.Start(t)
	push := map[string]any{"items": []map[string]any{{"queue": "stopping", "partition": "p", "payload": map[string]int{"n": 1}}}}
	if r := b.Do(t, "POST", "/api/v1/push", "", push); r.Status != http.StatusCreated {
		t.Fatalf("first push = %d %s", r.Status, r.Body)
	}
	ctx := context.Background()
	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM queen.partitions FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	answer := make(chan brokertest.Response, 1)
	go func() { answer <- b.Do(t, "POST", "/api/v1/push", "", push) }()
	waitForLockWaiter(t, b)

	stopped := make(chan struct{})
	go func() {
		b.Stop()
		close(stopped)
	}()
	time.Sleep(300 * time.Millisecond) // the broker is draining
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-answer
	if r.Status != http.StatusCreated || len(r.Body) == 0 {
		t.Errorf("the push in flight at shutdown was answered %d %q, want 201 with its results", r.Status, r.Body)
	}
	<-stopped
	if n := b.Count(t, "SELECT count(*)::int FROM queen.log_segments"); n != 2 {
		t.Errorf("%d segments stored, want both pushes'", n)
	}
}

// A long-poll parked when the broker begins to stop answers at once, as
// an empty poll does: 204, not an empty 200.
func TestAParkedPopAnswers204WhenTheBrokerStops(t *testing.T) {
	b := brokertest.Start(t)
	answer := make(chan brokertest.Response, 1)
	go func() { answer <- b.Do(t, "GET", "/api/v1/pop/queue/idle?wait=true&timeout=30000", "", nil) }()
	b.WaitParked(t, 1)
	start := time.Now()
	b.Stop()
	r := <-answer
	if r.Status != http.StatusNoContent {
		t.Errorf("the parked pop was answered %d %q at shutdown, want 204", r.Status, r.Body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the broker took %v to stop with a parked pop", d)
	}
}

func waitForLockWaiter(t *testing.T, b *brokertest.Broker) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b.Count(t, "SELECT count(*)::int FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()") > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the push never waited on the lock")
		}
	}
}
