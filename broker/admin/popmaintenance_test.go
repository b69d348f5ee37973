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
	b.PushN(t, "q", "Default", 0, 1)
	b.Call(t, http.StatusOK, "POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": true})

	if ns := b.Pop(t, "/api/v1/pop/queue/q").Ns(); ns != nil {
		t.Fatalf("a pop during pop maintenance delivered %v", ns)
	}
	start := time.Now()
	if ns := b.Pop(t, "/api/v1/pop/queue/q?wait=true&timeout=400").Ns(); ns != nil {
		t.Fatalf("a long-poll during pop maintenance delivered %v", ns)
	}
	if held := time.Since(start); held < 350*time.Millisecond {
		t.Fatalf("a long-poll during pop maintenance answered after %v, not at its timeout", held)
	}
	for _, c := range b.Cursors(t, "q") {
		if c.LeaseID != nil {
			t.Fatalf("pop maintenance took a lease: %+v", c)
		}
	}

	got := make(chan []int, 1)
	go func() {
		ns := b.Pop(t, "/api/v1/pop/queue/q?wait=true&timeout=10000").Ns()
		got <- ns
	}()
	// A poll held by maintenance is not parked (regent_pops_parked does not
	// count it), so no event says it arrived: real time for it to reach the
	// broker before maintenance ends.
	time.Sleep(300 * time.Millisecond)
	b.Call(t, http.StatusOK, "POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": false})
	select {
	case ns := <-got:
		if len(ns) != 1 || ns[0] != 0 {
			t.Fatalf("the held long-poll delivered %v after pop maintenance ended, want [0]", ns)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the held long-poll did not carry on after pop maintenance ended")
	}
}
