package admin_test

import (
	"net/http"
	"testing"
	"time"
)

// Pop maintenance (queue-admin-api.md §7): a pop delivers nothing and takes
// no lease; a long-poll is held until its timeout instead of answering at
// once, and carries on as a normal pop when the switch goes off meanwhile.
func TestPopMaintenanceHoldsLongPollsAndDeliversNothingUntilItEnds(t *testing.T) {
	t.Parallel()
	b := start(t)
	push(t, b, "q", "Default", 0, 1)
	call(t, b, http.StatusOK, "POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": true})

	if _, ns := pop(t, b, "/api/v1/pop/queue/q"); ns != nil {
		t.Fatalf("a pop during pop maintenance delivered %v", ns)
	}
	start := time.Now()
	if _, ns := pop(t, b, "/api/v1/pop/queue/q?wait=true&timeout=400"); ns != nil {
		t.Fatalf("a long-poll during pop maintenance delivered %v", ns)
	}
	if held := time.Since(start); held < 350*time.Millisecond {
		t.Fatalf("a long-poll during pop maintenance answered after %v, not at its timeout", held)
	}
	if leased := b.Count(t, `SELECT count(*) FROM queen.cursors WHERE lease_id IS NOT NULL`); leased != 0 {
		t.Fatalf("pop maintenance took %d leases", leased)
	}

	got := make(chan []int, 1)
	go func() {
		_, ns := pop(t, b, "/api/v1/pop/queue/q?wait=true&timeout=10000")
		got <- ns
	}()
	time.Sleep(300 * time.Millisecond)
	call(t, b, http.StatusOK, "POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": false})
	select {
	case ns := <-got:
		if len(ns) != 1 || ns[0] != 0 {
			t.Fatalf("the held long-poll delivered %v after pop maintenance ended, want [0]", ns)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the held long-poll did not carry on after pop maintenance ended")
	}
}
