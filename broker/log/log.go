// Package log owns the path that every write into the log takes, for
// POST /api/v1/push, a transaction's pushes, the spool's drain and the
// streams cycle's sink emits alike: resolve, pack, seal, push, then mark
// and announce. It also keeps the cache of the catalog the rest of the
// broker looks queues and partitions up in: ids and the options the broker
// reads in memory, and the tenancy gate on partition ids. Its statements
// are broker/db's (push.go, catalog.go); the name rules and the errors of a
// lookup are broker/catalog's.
//
// Data enters the log only through the allocator queen.log_push_one_v1
// (db.DB.Push), one call per request, which stores every segment of it. A
// caller that pushes goes through these steps, all on *Log:
//
//  1. Resolve (or ResolveAll) turns (tenant, queue, partition) into a
//     *Partition: ids and the queue options the broker needs in memory
//     (Queue.EncryptionEnabled among them). A queue and partition that do not
//     exist are created with default options. Answers are cached; Invalidate
//     drops a tenant's queue (the queue deletion route does it, and so must
//     any caller whose push failed with catalog.ErrPartitionGone, because
//     another replica deleted the queue behind the cache).
//  2. Pack frames the items into one *Segment per partition, in order of
//     first appearance: a UUIDv7 message id unless the item brings one, the
//     transaction id (the message id when absent), createdAt in microseconds,
//     producer sub and trace id, the payload sealed when the queue has
//     encryptionEnabled (a sealing failure logs a warning, counts in
//     regent_encryption_failures_total and stores plaintext), the encoded
//     body and checksum, the time range and the txids in frame order. Items
//     that repeat a client transaction id of an earlier item of the same
//     partition are not packed; Packed.DupOf names the earlier item.
//  3. Args lays the segments, sorted by partition id (SortSegments), out as
//     the arrays queen.log_push_one_v1 (or queen_streams.cycle) takes. The
//     function stores all of them or, when a partition is gone or already
//     holds some of the client transaction ids, none: Drop then takes those
//     items out (Packed.Stored remembers what the database held) and the
//     call runs again. Results answers every item once the rest is stored.
//     Push runs on the pool: pushes that arrive while Options.PushCalls
//     calls are in flight wait and join the next call (broker/batch), one
//     round trip and one commit for all of them, each request answered on
//     its own; and a partition gone behind the cache is resolved again
//     once. PushInTx runs in the caller's transaction, alone, and returns a
//     gone partition.
//  4. After the commit, AfterPush counts the messages per queue and
//     announces the partitions (Announce): this replica's hot list at once,
//     the other replicas by a NOTIFY the announcer sends, not the
//     transaction. The announcer's loop is the caller's to run.
//
// OwnedPartition is the tenancy gate for routes that take a partition id: a
// partition that does not exist and another tenant's both answer
// catalog.ErrNotFound.
package log

import (
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/batch"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/db"
	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/quota"
	"github.com/regent-mq/regent/broker/seal"
)

// optionsTTL bounds how long a replica trusts cached queue options and ids:
// configure and delete on another replica reach this one within it.
const optionsTTL = 5 * time.Second

// Log is the write path and the catalog. It is safe for concurrent use.
type Log struct {
	db      *db.DB
	sealer  *seal.Sealer // nil: no key; sealing fails and stores plaintext
	metrics *metrics.Metrics
	logger  *slog.Logger
	// announcer marks hot partitions here and tells the other replicas.
	announcer *hotlist.Announcer
	// quotas limits the tenants' pushes and queue creations; nil: none.
	quotas *quota.Quotas
	// pushes joins the pushes on the pool (natural batching).
	pushes *batch.Joiner[*pushCall]

	mu     sync.RWMutex
	queues map[queueKey]*Queue
	parts  map[partKey]*Partition
	byID   map[uuid.UUID]*Partition
}

type queueKey struct{ tenant, name string }

type partKey struct{ tenant, queue, partition string }

// Queue is a resolved queue and the options the broker reads in memory.
// Options used by stored procedures (lease time, retry limit, delay) are read
// there from queen.queues and are always current; these copies may lag by up
// to optionsTTL.
type Queue struct {
	ID                uuid.UUID
	Tenant            string
	Name              string
	LeaseTime         int // seconds
	RetryLimit        int
	DelayedProcessing int // seconds
	EncryptionEnabled bool
	loaded            time.Time
}

// Partition is a resolved partition of a queue.
type Partition struct {
	ID    uuid.UUID
	Name  string
	Queue *Queue
}

// Options are what a Log works with besides the database.
type Options struct {
	// Sealer seals the payloads of queues with encryptionEnabled; nil: no
	// key, and sealing fails and stores plaintext.
	Sealer  *seal.Sealer
	Metrics *metrics.Metrics
	// Announcer makes committed partitions visible to the pops of every
	// replica; its loop (Announcer.Run) is the caller's to run.
	Announcer *hotlist.Announcer
	// Quotas limits every push and queue creation; nil: none.
	Quotas *quota.Quotas
	// PushCalls is how many push calls to the database may be in flight at
	// once; the pushes that arrive while they all are wait, and join the
	// next call. 0: config.DefaultPushCalls.
	PushCalls int
	Logger    *slog.Logger
}

// maxJoined bounds the requests of one push call.
const maxJoined = 64

// New returns a Log on d.
func New(d *db.DB, o Options) *Log {
	l := &Log{
		db: d, sealer: o.Sealer, metrics: o.Metrics, logger: o.Logger, announcer: o.Announcer, quotas: o.Quotas,
		queues: map[queueKey]*Queue{},
		parts:  map[partKey]*Partition{},
		byID:   map[uuid.UUID]*Partition{},
	}
	calls := o.PushCalls
	if calls == 0 {
		calls = config.DefaultPushCalls
	}
	l.pushes = batch.New(calls, maxJoined, l.metrics.JoinedRequests.WithLabelValues("push"),
		l.metrics.JoinWaiting.WithLabelValues("push"), l.joinPushes)
	return l
}

// Announce makes a partition that committed data to deliver visible to the
// pops of every replica: this one's at once, the others' by NOTIFY within
// hotlist.Linger (see hotlist.Announcer). Call it after the commit.
func (l *Log) Announce(queueID, partitionID uuid.UUID) { l.announcer.Announce(queueID, partitionID) }
