package queue

import (
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/auth"
	"github.com/regent-mq/regent/broker/httpx"
)

// maxExtend bounds one extension, as a day.
const maxExtend = 24 * 60 * 60

// handleExtend is POST /api/v1/lease/{leaseId}/extend: every (partition,
// group) of the tenant holding that live lease gets
// expires = max(expires, now + seconds).
func (s *Store) handleExtend(w http.ResponseWriter, r *http.Request) {
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
	var held int
	var expires pgtype.Timestamptz
	err = s.pool.QueryRow(r.Context(), `WITH owned AS (
			SELECT c.partition_id, c.consumer_group, c.lease_expires_at
			  FROM queen.cursors c
			  JOIN queen.partitions p ON p.id = c.partition_id
			  JOIN queen.queues q ON q.id = p.queue_id
			 WHERE c.lease_id = $2 AND q.tenant = $1
			   FOR UPDATE OF c
		), extended AS (
			UPDATE queen.cursors c
			   SET lease_expires_at = greatest(c.lease_expires_at, now() + make_interval(secs => $3))
			  FROM owned o
			 WHERE c.partition_id = o.partition_id AND c.consumer_group = o.consumer_group
			   AND queen.lease_live(o.lease_expires_at)
			RETURNING c.lease_expires_at
		)
		SELECT (SELECT count(*) FROM owned), (SELECT max(lease_expires_at) FROM extended)`,
		auth.FromContext(r.Context()).Tenant, leaseID, seconds).Scan(&held, &expires)
	if err != nil {
		s.fail(w, r, "extend lease", err)
		return
	}
	res := map[string]any{"index": 0, "leaseId": leaseID, "success": expires.Valid, "error": nil, "expiresAt": nil}
	switch {
	case held == 0:
		res["error"] = "Lease not found"
	case !expires.Valid:
		res["error"] = "Lease already expired"
	default:
		res["expiresAt"] = expires.Time.UTC().Format(TimeFormat)
	}
	httpx.WriteJSON(w, http.StatusOK, []any{res})
}
