// Package queuestore is the queue's consumer side over the log of packed
// segments: pop claims, acks, dead letters, queue configuration and
// deletion, and the feed of the hot list. Its statements are broker/pg/db's
// (queue_pop.go, queue_ack.go, queue_dlq.go, queue_configure.go); what it
// adds is what Go must do around them: decoding and opening the frames,
// the hot list, the caches, the counters and the announcements. Every
// write into the log goes through broker/domain/produce, and queues and
// partitions are looked up in broker/domain/catalog. The HTTP handlers are
// broker/api/queue's; nothing here knows about HTTP.
//
// A pop takes candidate partitions from this replica's hot list
// (broker/domain/hotlist) and claims them in one call of queen.pop_v2, which leases
// them and returns their segments; Go decodes only the frames of the batch.
// Acks go through queen.ack_cursor when they are the common case (all
// 'completed', one cursor, one lease) and queen.ack_v2 otherwise, each one
// call; the dead letters of an ack cost one more at most, since their
// payloads must be decoded in Go (db.DB.Ack). After the commit, AfterAck announces the
// releases that leave data to deliver, as pushes are announced. Retention
// (broker/domain/retention) deletes whole segments; every walk skips the gaps.
package queuestore

import (
	"log/slog"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/broker/domain/quota"
	"github.com/regent-mq/regent/broker/domain/seal"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/db"
)

// Store is the queue's consumer-side storage. It is safe for concurrent
// use.
type Store struct {
	db      *db.DB
	catalog *catalog.Catalog
	// after does what the store's own writes (a release, the end of a
	// batch) leave to do once they have committed.
	after  *commit.Applier
	sealer *seal.Sealer
	// quotas counts the tenants' pops against their limits; nil: none.
	quotas  *quota.Quotas
	metrics *metrics.Metrics
	logger  *slog.Logger
	hot     *hotlist.List
	// maxPopBytes caps the stored bytes of one pop's answer (queen.pop_v2); a
	// pop always delivers at least one message.
	maxPopBytes int64
}

// New returns a Store over the queues and partitions of cat. sealer opens
// what the write path sealed (nil: no key); quotas may be nil.
func New(d *db.DB, cat *catalog.Catalog, after *commit.Applier, sealer *seal.Sealer, quotas *quota.Quotas,
	m *metrics.Metrics, hot *hotlist.List, logger *slog.Logger, maxPopBytes int64) *Store {
	return &Store{db: d, catalog: cat, after: after, sealer: sealer, quotas: quotas, metrics: m, logger: logger,
		hot: hot, maxPopBytes: maxPopBytes}
}
