// Package queue is Regent's Queen-compatible partitioned queue: the
// /api/v1 routes (configure, push, pop, ack, ack/batch, lease extend,
// transaction, dlq, queue deletion) over the log of packed segments in
// schema queen. Every write into the log goes through broker/log, which
// also resolves queues and partitions for the routes here; this package is
// the consumer side and the handlers.
//
// A pop takes candidate partitions from this replica's hot list
// (broker/hotlist) and claims them in one call of queen.pop, which leases
// them and returns their segments; Go decodes only the frames of the batch.
// A parked long-poll waits on the hot list's signal for the queue. Acks go
// through queen.ack_cursor when they are the common case (all
// 'completed', one cursor, one lease) and queen.ack otherwise, each one
// call; the dead letters of an ack cost one more at most, since their
// payloads must be decoded here. After the commit, AfterAck announces the releases that leave data to
// deliver, as pushes are announced. Retention
// (broker/retention) deletes whole segments; every walk skips the gaps.
//
// Files follow the routes: configure.go, push.go, pop.go, ack.go, lease.go,
// transaction.go, dlq.go; wire.go builds the hot answers by hand; run.go
// feeds the hot list.
package queue

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/broker/log"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/seal"
	"github.com/regent-mq/regent/broker/spool"
)

// QueueMode is the consumer group used when a request names none: plain
// competing consumers.
const QueueMode = "__QUEUE_MODE__"

// Store is the queue's handlers and its consumer-side storage. It is safe
// for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	log      *log.Log
	sealer   *seal.Sealer
	metrics  *metrics.Metrics
	logger   *slog.Logger
	hot      *hotlist.List
	settings Settings
}

// Settings are what the broker's configuration and its switches decide for
// the queue.
type Settings struct {
	// MaxPopBytes caps the stored bytes of one pop's answer (queen.pop); a
	// pop always delivers at least one message.
	MaxPopBytes int64
	// PopPaused reports pop maintenance (queue-admin-api.md §7): while it
	// holds, pops deliver nothing and take no lease.
	PopPaused func() bool
	// Spool takes the pushes while push maintenance is on (§7); nil never
	// buffers.
	Spool *spool.Spool
}

// New returns a Store over the write path l.
func New(pool *pgxpool.Pool, l *log.Log, m *metrics.Metrics, hot *hotlist.List, logger *slog.Logger, settings Settings) *Store {
	return &Store{pool: pool, log: l, sealer: l.Sealer(), metrics: m, logger: logger, hot: hot, settings: settings}
}
