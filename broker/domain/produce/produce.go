// Package produce owns the path that every write into the log takes, for
// POST /api/v1/push, a transaction's pushes, the spool's drain and the
// streams cycle's sink emits alike: resolve, pack, seal, store, then mark
// and announce. Its statements are broker/pg/db's (push.go); the queues and
// partitions come from broker/domain/catalog.
//
// Data enters the log only through the allocator queen.log_push_one_v1
// (db.DB.Push), or the cycle's call (db.DB.RunCycle) for its sink emits:
// one call per request, which stores every segment of it. Every writer
// (the push route, a transaction's pushes, the spool's drain, the cycle)
// calls Emit with a Write that says which of those it is, and gets back
// the answer to every item and the commit.After it leaves to do. Emit:
//
//  1. Packs (Pack): resolves every item's (tenant, queue, partition) in the
//     catalog (catalog.Catalog.ResolveAll, which creates what does not
//     exist), and frames the items into one *Segment per partition, in
//     order of first appearance: a UUIDv7 message id unless the item brings
//     one, the transaction id (the message id when absent), createdAt in
//     microseconds, producer sub, trace id and traceparent (Trace), the
//     payload sealed when the queue has encryptionEnabled (a sealing
//     failure logs a warning, counts in regent_encryption_failures_total
//     and stores plaintext), the encoded body and checksum, the time range
//     and the txids in frame order. Items that repeat a client transaction
//     id of an earlier item of the same partition are not packed;
//     Packed.DupOf names the earlier item.
//  2. Admits the write under the tenant's quotas: the push rates and
//     maxStoredBytes for a push, maxStoredBytes alone for a cycle.
//  3. Stores the segments, sorted by partition id (the lock order), in one
//     call, which stores all of them or, when a partition is gone or
//     already holds some of the client transaction ids, none: Drop takes
//     the items the database held out (Packed.Stored remembers them) and
//     the call runs again; a partition gone behind the catalog's cache is
//     resolved again and the write run again, once, except in the caller's
//     transaction (Write.Tx), which cannot run again. A push on the pool
//     joins the pushes that arrive while Options.PushCalls calls are in
//     flight (broker/domain/batch): one round trip and one commit for all of
//     them, each request answered on its own.
//  4. Answers every item (Packed.Results), and says what the committed
//     write leaves to do (a commit.After: the counts per queue and the
//     partitions to announce), which the caller applies once its
//     transaction has committed: this replica's hot list at once, the
//     other replicas by a NOTIFY the announcer sends, not the transaction.
package produce

import (
	"log/slog"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/batch"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/quota"
	"github.com/regent-mq/regent/broker/domain/seal"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/db"
)

// Producer is the write path. It is safe for concurrent use.
type Producer struct {
	db      *db.DB
	catalog *catalog.Catalog
	sealer  *seal.Sealer // nil: no key; sealing fails and stores plaintext
	metrics *metrics.Metrics
	logger  *slog.Logger
	// quotas limits the tenants' pushes and queue creations; nil: none.
	quotas *quota.Quotas
	// traceparents: Trace stamps (Options.StoreTraceparent).
	traceparents bool
	// pushes joins the pushes on the pool (natural batching).
	pushes *batch.Joiner[*pushCall]
}

// Options are what a Producer works with besides the database and the
// catalog.
type Options struct {
	// Sealer seals the payloads of queues with encryptionEnabled; nil: no
	// key, and sealing fails and stores plaintext.
	Sealer  *seal.Sealer
	Metrics *metrics.Metrics
	// Quotas limits every push and queue creation; nil: none.
	Quotas *quota.Quotas
	// PushCalls is how many push calls to the database may be in flight at
	// once; the pushes that arrive while they all are wait, and join the
	// next call. 0: config.DefaultPushCalls.
	PushCalls int
	Logger    *slog.Logger
	// StoreTraceparent keeps the traceparent Trace stamps; off, Trace
	// stamps nothing (see Trace).
	StoreTraceparent bool
}

// maxJoined bounds the requests of one push call.
const maxJoined = 64

// New returns a Producer that stores on d the items of the queues and
// partitions of cat.
func New(d *db.DB, cat *catalog.Catalog, o Options) *Producer {
	l := &Producer{
		db: d, catalog: cat, sealer: o.Sealer, metrics: o.Metrics, logger: o.Logger, quotas: o.Quotas,
		traceparents: o.StoreTraceparent,
	}
	calls := o.PushCalls
	if calls == 0 {
		calls = config.DefaultPushCalls
	}
	l.pushes = batch.New(calls, maxJoined, l.metrics.JoinedRequests.WithLabelValues("push"),
		l.metrics.JoinWaiting.WithLabelValues("push"), l.joinPushes)
	return l
}
