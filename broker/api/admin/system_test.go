package admin_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

// TestMaintenanceSwitches runs the tests that turn a switch on: they have a
// broker of their own (with a replica on its database), since a switch
// holds every pop or push of the broker, whoever's. They run in turn.
func TestMaintenanceSwitches(t *testing.T) {
	t.Parallel()
	a := start(t)
	b := brokertest.StartOn(t, a.DatabaseURL, quietHotList) // another replica, or the same one restarted
	t.Run("RoutesAnswerQueensShapes", func(t *testing.T) { maintenanceRoutesAnswerQueensShapes(t, a) })
	t.Run("SharedByReplicasAndSurviveRestarts", func(t *testing.T) { maintenanceSwitchesAreSharedByReplicas(t, a, b) })
	t.Run("PopMaintenanceHoldsLongPollsAndDeliversNothingUntilItEnds", func(t *testing.T) { popMaintenanceHoldsLongPolls(t, b) })
}

func maintenanceRoutesAnswerQueensShapes(t *testing.T, b *brokertest.Broker) {
	r := b.Call(t, http.StatusOK, "GET", "/api/v1/system/maintenance", nil)
	require.JSONEq(t, `{"maintenanceMode": false, "popMaintenanceMode": false, "bufferedMessages": 0,
		"bufferHealthy": true, "bufferStats": {"pendingCount": 0, "failedCount": 0, "dbHealthy": true,
		"failedFiles": {"count": 0, "totalBytes": 0, "totalMB": 0, "failoverCount": 0, "qos0Count": 0}}}`, string(r.Body))

	m := b.Call(t, http.StatusOK, "POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}).Map(t)
	require.Equal(t, true, m["maintenanceMode"])
	require.EqualValues(t, 0, m["bufferedMessages"])
	require.Equal(t, true, m["bufferHealthy"])
	require.NotEmpty(t, m["message"])

	m = b.Call(t, http.StatusOK, "POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": true}).Map(t)
	require.Equal(t, true, m["popMaintenanceMode"])
	require.NotEmpty(t, m["message"])
	m = b.Call(t, http.StatusOK, "GET", "/api/v1/system/maintenance/pop", nil).Map(t)
	require.Equal(t, true, m["popMaintenanceMode"])
	require.NotEmpty(t, m["message"])

	m = b.Call(t, http.StatusOK, "POST", "/api/v1/system/maintenance", map[string]any{"enabled": false}).Map(t)
	require.Equal(t, false, m["maintenanceMode"])
	m = b.Call(t, http.StatusOK, "GET", "/api/v1/system/maintenance", nil).Map(t)
	require.Equal(t, false, m["maintenanceMode"])
	require.Equal(t, true, m["popMaintenanceMode"], "the two switches are separate")
}

func maintenanceSwitchesAreSharedByReplicas(t *testing.T, a, b *brokertest.Broker) {
	a.Call(t, http.StatusOK, "POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": true})
	m := b.Call(t, http.StatusOK, "GET", "/api/v1/system/shared-state", nil).Map(t)
	require.Equal(t, map[string]any{"enabled": false, "reason": "not_applicable",
		"maintenance_mode": false, "pop_maintenance_mode": true}, m)
	a.Call(t, http.StatusOK, "POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": false})
	m = b.Call(t, http.StatusOK, "GET", "/api/v1/system/shared-state", nil).Map(t)
	require.Equal(t, false, m["pop_maintenance_mode"])
}

func TestMaintenanceRefusesAnythingButABooleanEnabled(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t) // it switches nothing
	for _, path := range []string{"/api/v1/system/maintenance", "/api/v1/system/maintenance/pop"} {
		for _, body := range []string{``, `{}`, `{"enabled": null}`, `{"enabled": "true"}`, `{"enabled": 1}`} {
			r := b.Call(t, http.StatusBadRequest, "POST", path, body)
			require.Equal(t, "enabled (boolean) is required", r.Map(t)["error"], "%s %s", path, body)
		}
		r := b.Call(t, http.StatusBadRequest, "POST", path, `[true]`)
		require.Equal(t, "Request body must be a JSON object", r.Map(t)["error"])
		r = b.Call(t, http.StatusBadRequest, "POST", path, `{bad`)
		require.Contains(t, r.Map(t)["error"], "Invalid JSON")
	}
	m := b.Call(t, http.StatusOK, "GET", "/api/v1/system/maintenance", nil).Map(t)
	require.Equal(t, false, m["maintenanceMode"])
}

func TestMigrationRoutesAre501(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	for _, route := range [][2]string{{"POST", "test-connection"}, {"POST", "start"}, {"POST", "validate"},
		{"POST", "reset"}, {"GET", "status"}} {
		r := b.Call(t, http.StatusNotImplemented, route[0], "/api/v1/migration/"+route[1], nil)
		require.JSONEq(t, `{"error": "migration is not supported by this broker"}`, string(r.Body))
	}
}

// Pop maintenance (queue-admin-api.md §7): a pop delivers nothing and takes
// no lease; a long-poll is held until its timeout instead of answering at
// once, and carries on as a normal pop when the switch goes off meanwhile.
// Run by TestMaintenanceSwitches.
func popMaintenanceHoldsLongPolls(t *testing.T, b *brokertest.Broker) {
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
