// Package queue serves Regent's Queen-compatible partitioned queue: the
// /api/v1 routes (configure, push, pop, ack, ack/batch, lease extend,
// transaction, dlq, queue deletion). Handlers parse and check requests and
// render answers; the consumer-side storage is broker/queue/store, and
// every write into the log goes through broker/produce.
//
// A parked long-poll waits on the hot list's signal for the queue (through
// the store's Popped.Wake).
//
// Files follow the routes: configure.go, push.go, pop.go, ack.go, lease.go,
// transaction.go, dlq.go; wire.go builds the hot answers by hand.
package queue

import (
	"log/slog"

	"github.com/regent-mq/regent/broker/db"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/produce"
	"github.com/regent-mq/regent/broker/queue/store"
	"github.com/regent-mq/regent/broker/quota"
	"github.com/regent-mq/regent/broker/spool"
)

// Handler serves the queue's routes. It is safe for concurrent use.
type Handler struct {
	store    *store.Store
	producer *produce.Producer
	db       *db.DB // what acks outside a transaction run on
	// quotas limits the tenants' pops; nil: none.
	quotas  *quota.Quotas
	metrics *metrics.Metrics
	logger  *slog.Logger
	// popPaused reports pop maintenance (queue-admin-api.md §7): while it
	// holds, pops deliver nothing and take no lease.
	popPaused func() bool
	// defaultMode is the subscriptionMode of a pop that sends none
	// (DEFAULT_SUBSCRIPTION_MODE).
	defaultMode string
	// spool takes the pushes while push maintenance is on (§7); nil never
	// buffers.
	spool *spool.Spool
}

// New returns the handlers over st and the write path producer; sp (nil: none)
// takes the pushes while push maintenance is on, and quotas (nil: none)
// limits the pops.
func New(st *store.Store, producer *produce.Producer, d *db.DB, quotas *quota.Quotas, m *metrics.Metrics, logger *slog.Logger, popPaused func() bool, defaultMode string, sp *spool.Spool) *Handler {
	return &Handler{store: st, producer: producer, db: d, quotas: quotas, metrics: m, logger: logger, popPaused: popPaused, defaultMode: defaultMode, spool: sp}
}
