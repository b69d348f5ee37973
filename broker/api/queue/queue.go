// Package queue serves Regent's Queen-compatible partitioned queue: the
// /api/v1 routes (configure, push, pop, ack, ack/batch, lease extend,
// transaction, dlq, queue deletion). Handlers parse and check requests and
// render answers; the consumer-side storage is broker/domain/queuestore, and
// every write into the log goes through broker/domain/produce.
//
// A parked long-poll waits in the hot list's line of its queue and
// consumer group until a mark wakes it (the store's Popped.Wake), and
// leaves the line when it answers (queuestore.PopRequest.Leave).
//
// Files follow the routes: configure.go, push.go, pop.go, ack.go, lease.go,
// transaction.go, dlq.go; wire.go builds the hot answers by hand.
package queue

import (
	"log/slog"
	"time"

	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/produce"
	"github.com/regent-mq/regent/broker/domain/queuestore"
	"github.com/regent-mq/regent/broker/domain/quota"
	"github.com/regent-mq/regent/broker/domain/spool"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/db"
)

// Handler serves the queue's routes. It is safe for concurrent use.
type Handler struct{ Deps }

// Deps are what the queue's handlers work with.
type Deps struct {
	Store    *queuestore.Store
	Producer *produce.Producer
	DB       *db.DB // what acks outside a transaction run on
	// After does what committed writes leave to do.
	After *commit.Applier
	// Quotas limits the tenants' pops; nil: none.
	Quotas  *quota.Quotas
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// PopPaused reports pop maintenance (queue-admin-api.md §7): while it
	// holds, pops deliver nothing and take no lease.
	PopPaused func() bool
	// DefaultMode is the subscriptionMode of a pop that sends none
	// (DEFAULT_SUBSCRIPTION_MODE).
	DefaultMode string
	// Spool takes the pushes while push maintenance is on (§7); nil never
	// buffers.
	Spool *spool.Spool
	// DedupWindow is the dedupWindowSeconds of a queue that sets none
	// (--dedup-window): what configure echoes for it.
	DedupWindow time.Duration
}

// New returns the queue's handlers.
func New(d Deps) *Handler { return &Handler{d} }
