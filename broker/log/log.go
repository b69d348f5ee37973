// Package log owns the path that every write into the log takes, for
// POST /api/v1/push, a transaction's pushes and the streams cycle's sink
// emits alike: resolve, pack, seal, push, then mark and announce. It also
// keeps the catalog the rest of the broker looks queues and partitions up
// in: ids and the options the broker reads in memory, and the tenancy gate
// on partition ids.
//
// Data enters the log only through the allocator queen.log_push_one_v1,
// one call per request, which stores every segment of it. A caller that
// pushes (the push route, a transaction, the streams cycle's
// sink emits) goes through these steps, all on *Log:
//
//  1. Resolve (or ResolveAll) turns (tenant, queue, partition) into a
//     *Partition: ids and the queue options the broker needs in memory
//     (Queue.EncryptionEnabled among them). A queue and partition that do not
//     exist are created with default options. Answers are cached; Invalidate
//     drops a tenant's queue (the queue deletion route does it, and so must
//     any caller whose push failed with ErrPartitionGone, because another
//     replica deleted the queue behind the cache).
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
//     the arrays queen.log_push_one_v1 (or queen_streams.cycle) takes. The function
//     stores all of them or, when a partition is gone or already holds some
//     of the client transaction ids, none: Drop then takes those items out
//     (Packed.Stored remembers what the database held) and the call runs
//     again. Results answers every item once the rest is stored. On the
//     pool, pushes that arrive while JoinPushes' number of calls are in
//     flight wait and join the next call (broker/batch): one round trip and
//     one commit for all of them, each request answered on its own.
//  4. After the commit, AfterPush counts the messages per queue and
//     announces the partitions (Announce): this replica's hot list at once,
//     the other replicas by a NOTIFY the broker sends, not the transaction.
//
// OwnedPartition is the tenancy gate for routes that take a partition id: a
// partition that does not exist and another tenant's both answer ErrNotFound.
package log

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/batch"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/quota"
	"github.com/regent-mq/regent/broker/seal"
)

// DefaultPartition is the partition of an item or pop that names none.
const DefaultPartition = "Default"

var (
	// ErrNotFound is returned for a missing queue or partition, and for one
	// owned by another tenant: the two are indistinguishable on purpose.
	ErrNotFound = errors.New("not found")
	// ErrPartitionGone is returned by a push whose partition was deleted
	// after it was resolved; Invalidate and resolve again.
	ErrPartitionGone = errors.New("partition not found")
)

// queueName is the name rule for queues (queue-api.md, configure).
var queueName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,255}$`)

// maxPartitionName bounds partition names, which have no other rule.
const maxPartitionName = 255

// optionsTTL bounds how long a replica trusts cached queue options and ids:
// configure and delete on another replica reach this one within it.
const optionsTTL = 5 * time.Second

// Log is the write path and the catalog. It is safe for concurrent use.
type Log struct {
	pool    *pgxpool.Pool
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

// New returns a Log. sealer may be nil (no encryption key configured).
func New(pool *pgxpool.Pool, sealer *seal.Sealer, m *metrics.Metrics, announcer *hotlist.Announcer, logger *slog.Logger) *Log {
	l := &Log{
		pool: pool, sealer: sealer, metrics: m, logger: logger,
		announcer: announcer,
		queues:    map[queueKey]*Queue{},
		parts:     map[partKey]*Partition{},
		byID:      map[uuid.UUID]*Partition{},
	}
	l.JoinPushes(config.DefaultPushCalls)
	return l
}

// maxJoined bounds the requests of one push call.
const maxJoined = 64

// JoinPushes sets how many push calls to the database may be in flight at
// once; the pushes that arrive while they all are wait, and join the next
// call. Call it before the log serves.
func (l *Log) JoinPushes(calls int) {
	l.pushes = batch.New(calls, maxJoined, l.metrics.JoinedRequests.WithLabelValues("push"),
		l.metrics.JoinWaiting.WithLabelValues("push"), l.joinPushes)
}

// Limit makes every push and queue creation pass the tenants' quotas
// (package quota). Call it before the log serves.
func (l *Log) Limit(q *quota.Quotas) { l.quotas = q }

// Quotas are the tenants' quotas the log applies (nil: none), for the
// routes that check them too (pops, cycles).
func (l *Log) Quotas() *quota.Quotas { return l.quotas }

// Run sends this replica's announcements until ctx ends.
func (l *Log) Run(ctx context.Context) { l.announcer.Run(ctx) }

// Announce makes a partition that committed data to deliver visible to the
// pops of every replica: this one's at once, the others' by NOTIFY within
// hotlist.Linger (see hotlist.Announcer). Call it after the commit.
func (l *Log) Announce(queueID, partitionID uuid.UUID) { l.announcer.Announce(queueID, partitionID) }

// Sealer is the payload sealer (nil without a key): the consumer side opens
// what Pack sealed.
func (l *Log) Sealer() *seal.Sealer { return l.sealer }
