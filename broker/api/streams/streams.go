// Package streams serves the three /streams/v1 routes: query registration,
// the state read and the cycle, and Regent's listing of the registered
// queries. The handlers here decode and check requests and apply the route
// rules; broker/pg/db talks to PostgreSQL.
//
// Every route is tenant-scoped, and the tenant comes only from the request's
// identity (auth.FromContext), never from the body.
package streams

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/api/server"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/produce"
	"github.com/regent-mq/regent/broker/domain/queuestore"
	"github.com/regent-mq/regent/broker/domain/quota"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/db"
)

// Service holds what the streams handlers share.
type Service struct {
	db *db.DB
	// catalog answers the partition ownership check.
	catalog *catalog.Catalog
	// producer is the write path of the sink pushes (packing, the retry,
	// bookkeeping).
	producer *produce.Producer
	// after does what committed cycles leave to do.
	after *commit.Applier
	// consumers delivers the next batch that a cycle claims, as a pop.
	consumers *queuestore.Store
	// quotas limits the stored bytes of the sink pushes, and records the
	// database's refusals; nil: none.
	quotas  *quota.Quotas
	metrics *metrics.Metrics
	log     *slog.Logger
	// With tenancy on, a partition id is checked against the caller's
	// tenant before any procedure runs.
	tenancy bool
}

// New returns the streams service; quotas may be nil.
func New(d *db.DB, cat *catalog.Catalog, producer *produce.Producer, after *commit.Applier, consumers *queuestore.Store,
	quotas *quota.Quotas, m *metrics.Metrics, logger *slog.Logger, tenancy bool) *Service {
	return &Service{db: d, catalog: cat, producer: producer, after: after, consumers: consumers, quotas: quotas, metrics: m,
		log: logger, tenancy: tenancy}
}

// ownPartition is the tenancy pre-gate of the state read and the cycle: a
// partition that is not the caller's, or does not exist, answers 404
// before any procedure runs. With tenancy off it lets everything through
// (the procedures give their own verdicts).
func (s *Service) ownPartition(w http.ResponseWriter, r *http.Request, tenant string, id uuid.UUID) bool {
	if !s.tenancy {
		return true
	}
	_, err := s.catalog.OwnedPartition(r.Context(), tenant, id)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		httpx.WriteError(w, http.StatusNotFound, "not found")
		return false
	case err != nil:
		s.fail(w, r, err)
		return false
	}
	return true
}

// Routes are the three streams routes with their access levels, and
// Regent's read-only listing of the registered queries (the console's).
func (s *Service) Routes() []server.Route {
	return []server.Route{
		{Method: http.MethodGet, Path: "/streams/v1/queries", Level: auth.ReadOnly, Handler: s.list},
		{Method: http.MethodPost, Path: "/streams/v1/queries", Level: auth.ReadWrite, Handler: s.register},
		{Method: http.MethodPost, Path: "/streams/v1/state/get", Level: auth.ReadOnly, Handler: s.stateGet},
		{Method: http.MethodPost, Path: "/streams/v1/cycle", Level: auth.ReadWrite, Handler: s.cycle, Span: "cycle"},
	}
}
