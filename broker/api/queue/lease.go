package queue

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
)

// maxExtend bounds one extension, as a day.
const maxExtend = 24 * 60 * 60

// handleExtend is POST /api/v1/lease/{leaseId}/extend: every (partition,
// group) of the tenant holding that live lease gets
// expires = max(expires, now + seconds).
func (s *Handler) handleExtend(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("leaseId")
	leaseID, err := uuid.Parse(raw)
	if err != nil {
		httpx.Fail(w, httpx.NotUUID("leaseId", raw))
		return
	}
	var body struct {
		Seconds *int `json:"seconds"`
	}
	if err := httpx.ReadJSON(r, &body); err != nil {
		httpx.Fail(w, err)
		return
	}
	seconds := 60
	if body.Seconds != nil {
		seconds = *body.Seconds
	}
	if seconds < 1 || seconds > maxExtend {
		httpx.Fail(w, httpx.BadRequest("seconds must be from 1 to %d", maxExtend))
		return
	}
	ext, err := s.DB.ExtendLease(r.Context(), auth.FromContext(r.Context()).Tenant, leaseID, seconds)
	if err != nil {
		s.fail(w, r, "extend lease", err)
		return
	}
	res := map[string]any{"index": 0, "leaseId": leaseID, "success": !ext.ExpiresAt.IsZero(), "error": nil, "expiresAt": nil}
	switch {
	case !ext.Held:
		res["error"] = "Lease not found"
	case ext.ExpiresAt.IsZero():
		res["error"] = "Lease already expired"
	default:
		res["expiresAt"] = ext.ExpiresAt.UTC().Format(httpx.TimeFormat)
	}
	httpx.WriteJSON(w, http.StatusOK, []any{res})
}
