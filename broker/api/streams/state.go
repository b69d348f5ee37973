package streams

import (
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/pg/db"
)

type stateRequest struct {
	QueryID        string   `json:"query_id"`
	PartitionID    string   `json:"partition_id"`
	Keys           []string `json:"keys"`
	KeyPrefix      string   `json:"key_prefix"`
	RipeAtOrBefore *float64 `json:"ripe_at_or_before"`
}

// stateGet is POST /streams/v1/state/get.
func (s *Service) stateGet(w http.ResponseWriter, r *http.Request) {
	var req stateRequest
	if err := httpx.ReadJSON(r, &req); err != nil {
		httpx.Fail(w, err)
		return
	}
	id := auth.FromContext(r.Context())
	f := db.StateFilter{
		Keys:           req.Keys,
		KeyPrefix:      req.KeyPrefix,
		RipeAtOrBefore: req.RipeAtOrBefore,
		// A ripe read by a caller that may flush what it read is recorded
		// (the idle flush's rule 5, queen_streams.cycle_rules); a read-only
		// observer's is not, since it would vouch for reads it did not do.
		Mark: id.Level >= auth.ReadWrite,
	}
	var err error
	if f.QueryID, err = parseID("query_id", req.QueryID); err != nil {
		httpx.Fail(w, err)
		return
	}
	if f.PartitionID, err = parseID("partition_id", req.PartitionID); err != nil {
		httpx.Fail(w, err)
		return
	}
	// PostgreSQL text cannot hold NUL, so such a key can never exist.
	if strings.ContainsRune(req.KeyPrefix, 0) {
		httpx.WriteError(w, http.StatusBadRequest, "key_prefix must not contain NUL")
		return
	}
	for _, k := range req.Keys {
		if strings.ContainsRune(k, 0) {
			httpx.WriteError(w, http.StatusBadRequest, "keys must not contain NUL")
			return
		}
	}
	if !s.ownPartition(w, r, id.Tenant, f.PartitionID) {
		return
	}
	// The rows go straight into the answer, values as PostgreSQL sent them.
	body := append(make([]byte, 0, 4096), `{"success":true,"rows":[`...)
	// Another tenant's query reads as an unknown one: no rows.
	owns, err := s.catalog.OwnsQuery(r.Context(), id.Tenant, f.QueryID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n := 0
	if owns {
		err = s.db.State(r.Context(), f, func(key string, value []byte, updated time.Time) {
			if n > 0 {
				body = append(body, ',')
			}
			n++
			body = appendStateRow(body, key, value, updated)
		})
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	httpx.WriteBody(w, http.StatusOK, append(body, "]}"...))
}

// parseID reads a required UUID field: missing, empty or malformed is a 400.
func parseID(field, v string) (uuid.UUID, error) {
	if v == "" {
		return uuid.UUID{}, httpx.BadRequest("%s is required", field)
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return uuid.UUID{}, httpx.NotUUID(field, v)
	}
	return id, nil
}

// appendStateRow appends one row of the state read, {"key", "value",
// "updated_at"}: the key escaped as encoding/json escapes strings, the value
// as PostgreSQL sent it (BenchmarkStateAnswer measures it against
// encoding/json).
func appendStateRow(b []byte, key string, value []byte, updated time.Time) []byte {
	b = append(b, `{"key":`...)
	b = httpx.AppendString(b, key)
	b = append(b, `,"value":`...)
	b = append(b, value...)
	b = append(b, `,"updated_at":"`...)
	b = updated.UTC().AppendFormat(b, httpx.TimeFormat)
	return append(b, `"}`...)
}
