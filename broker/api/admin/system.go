package admin

import (
	"encoding/json"
	"net/http"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/flags"
)

// handleMaintenance is GET /api/v1/system/maintenance, read fresh.
func (a *API) handleMaintenance(w http.ResponseWriter, r *http.Request) {
	s, err := a.flags.Read(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// The counts are the caller's tenant's pushes in this replica's spool;
	// the read above just reached the database.
	n := a.spool.Pending(tenant(r))
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"maintenanceMode": s.Maintenance, "popMaintenanceMode": s.PopMaintenance,
		"bufferedMessages": n, "bufferHealthy": a.spool.Healthy(),
		"bufferStats": map[string]any{"pendingCount": n, "failedCount": 0, "dbHealthy": true,
			"failedFiles": map[string]any{"count": 0, "totalBytes": 0, "totalMB": 0.0, "failoverCount": 0, "qos0Count": 0}},
	})
}

// handleSetMaintenance is POST /api/v1/system/maintenance {"enabled": bool}.
func (a *API) handleSetMaintenance(w http.ResponseWriter, r *http.Request) {
	s, ok := a.set(w, r, flags.Maintenance)
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"maintenanceMode": s.Maintenance, "bufferedMessages": a.spool.Pending(tenant(r)), "bufferHealthy": a.spool.Healthy(),
		"message": onOff("Push maintenance mode", s.Maintenance),
	})
}

// handlePopMaintenance is GET /api/v1/system/maintenance/pop, read fresh.
func (a *API) handlePopMaintenance(w http.ResponseWriter, r *http.Request) {
	s, err := a.flags.Read(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"popMaintenanceMode": s.PopMaintenance, "message": onOff("Pop maintenance mode", s.PopMaintenance)})
}

// handleSetPopMaintenance is POST /api/v1/system/maintenance/pop {"enabled": bool}.
func (a *API) handleSetPopMaintenance(w http.ResponseWriter, r *http.Request) {
	s, ok := a.set(w, r, flags.PopMaintenance)
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"popMaintenanceMode": s.PopMaintenance, "message": onOff("Pop maintenance mode", s.PopMaintenance)})
}

// set reads {"enabled": <boolean>} and sets the switch for the cluster.
func (a *API) set(w http.ResponseWriter, r *http.Request, name string) (flags.State, bool) {
	var fields map[string]json.RawMessage
	if err := readBody(r, &fields); err != nil {
		httpx.Fail(w, err)
		return flags.State{}, false
	}
	var on bool
	if err := json.Unmarshal(fields["enabled"], &on); err != nil || !present(fields, "enabled") {
		httpx.Fail(w, httpx.BadRequest("enabled (boolean) is required"))
		return flags.State{}, false
	}
	s, err := a.flags.Set(r.Context(), name, on)
	if err != nil {
		a.fail(w, r, err)
		return flags.State{}, false
	}
	return s, true
}

func onOff(what string, on bool) string {
	if on {
		return what + " is on"
	}
	return what + " is off"
}

// handleSharedState is GET /api/v1/system/shared-state: Regent's replicas
// share their state through PostgreSQL, not a peer protocol.
func (a *API) handleSharedState(w http.ResponseWriter, r *http.Request) {
	s, err := a.flags.Read(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"enabled": false, "reason": "not_applicable",
		"maintenance_mode": s.Maintenance, "pop_maintenance_mode": s.PopMaintenance,
	})
}

// handleMigration answers the five migration routes: Queen copies its
// schema elsewhere with pg_dump for the dashboard's Migration view; Regent
// does not.
func handleMigration(w http.ResponseWriter, r *http.Request) {
	httpx.WriteError(w, http.StatusNotImplemented, "migration is not supported by this broker")
}
