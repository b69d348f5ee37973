package app_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
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
	release, err := b.DB.LockPartitions(t.Context(), b.Tenant, "stopping")
	if err != nil {
		t.Fatal(err)
	}
	defer release() //nolint:errcheck // a no-op once released
	answer := make(chan brokertest.Response, 1)
	go func() { answer <- b.Do(t, "POST", "/api/v1/push", "", push) }()
	brokertest.Eventually(t, 10*time.Second, func() error {
		if n, err := b.DB.LockWaiters(t.Context()); err != nil || n == 0 {
			return fmt.Errorf("the push never waited on the lock (%v)", err)
		}
		return nil
	})

	stopped := make(chan struct{})
	go func() {
		b.Stop()
		close(stopped)
	}()
	// The broker is draining once its listener refuses new connections.
	brokertest.Eventually(t, 10*time.Second, func() error {
		c, err := net.Dial("tcp", strings.TrimPrefix(b.URL, "http://"))
		if err != nil {
			return nil
		}
		c.Close()
		return errors.New("the broker still takes new connections")
	})
	if err := release(); err != nil {
		t.Fatal(err)
	}
	r := <-answer
	if r.Status != http.StatusCreated || len(r.Body) == 0 {
		t.Errorf("the push in flight at shutdown was answered %d %q, want 201 with its results", r.Status, r.Body)
	}
	<-stopped
	if n := b.Stored(t, "stopping").Segments; n != 2 {
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
