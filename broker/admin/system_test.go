package admin_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

func TestMaintenanceRoutesAnswerQueensShapes(t *testing.T) {
	t.Parallel()
	b := start(t)
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

func TestMaintenanceSwitchesAreSharedByReplicasAndSurviveRestarts(t *testing.T) {
	t.Parallel()
	a := start(t)
	a.Call(t, http.StatusOK, "POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": true})
	b := brokertest.StartOn(t, a.DatabaseURL) // another replica, or the same one restarted
	m := b.Call(t, http.StatusOK, "GET", "/api/v1/system/shared-state", nil).Map(t)
	require.Equal(t, map[string]any{"enabled": false, "reason": "not_applicable",
		"maintenance_mode": false, "pop_maintenance_mode": true}, m)
}

func TestMaintenanceRefusesAnythingButABooleanEnabled(t *testing.T) {
	t.Parallel()
	b := start(t)
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
	b := start(t)
	for _, route := range [][2]string{{"POST", "test-connection"}, {"POST", "start"}, {"POST", "validate"},
		{"POST", "reset"}, {"GET", "status"}} {
		r := b.Call(t, http.StatusNotImplemented, route[0], "/api/v1/migration/"+route[1], nil)
		require.JSONEq(t, `{"error": "migration is not supported by this broker"}`, string(r.Body))
	}
}
