package streams

import (
	"net/http"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
)

// list is GET /streams/v1/queries: the caller's tenant's queries with
// their lag, state rows, last cycle and source partitions. It is not in
// the seed's route table; the console reads it, since no other JSON route
// names the queries.
func (s *Service) list(w http.ResponseWriter, r *http.Request) {
	qs, err := s.db.Queries(r.Context(), auth.FromContext(r.Context()).Tenant)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"queries": qs})
}
