// Package store is the queue's consumer-side storage over the log of packed
// segments in schema queen: pop claims, acks, lease extensions, dead
// letters, queue configuration and deletion, and the feed of the hot list.
// Every write into the log goes through broker/log, which also resolves
// queues and partitions. The HTTP handlers are broker/queue's; nothing here
// knows about HTTP.
//
// A pop takes candidate partitions from this replica's hot list
// (broker/hotlist) and claims them in one call of queen.pop, which leases
// them and returns their segments; Go decodes only the frames of the batch.
// Acks go through queen.ack_cursor when they are the common case (all
// 'completed', one cursor, one lease) and queen.ack otherwise, each one
// call; the dead letters of an ack cost one more at most, since their
// payloads must be decoded here. After the commit, AfterAck announces the
// releases that leave data to deliver, as pushes are announced. Retention
// (broker/retention) deletes whole segments; every walk skips the gaps.
package store

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/broker/log"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/seal"
)

// Store is the queue's consumer-side storage. It is safe for concurrent
// use.
type Store struct {
	pool    *pgxpool.Pool
	log     *log.Log
	sealer  *seal.Sealer
	metrics *metrics.Metrics
	logger  *slog.Logger
	hot     *hotlist.List
	// maxPopBytes caps the stored bytes of one pop's answer (queen.pop); a
	// pop always delivers at least one message.
	maxPopBytes int64
}

// New returns a Store over the write path l.
func New(pool *pgxpool.Pool, l *log.Log, m *metrics.Metrics, hot *hotlist.List, logger *slog.Logger, maxPopBytes int64) *Store {
	return &Store{pool: pool, log: l, sealer: l.Sealer(), metrics: m, logger: logger, hot: hot, maxPopBytes: maxPopBytes}
}

// InTx runs fn in one database transaction, committed when fn returns nil.
func (s *Store) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}
