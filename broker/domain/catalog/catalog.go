package catalog

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Target names a partition by tenant, queue and partition name.
type Target struct {
	Tenant, Queue, Partition string
	// Near, when set, is a partition that the target's is placed beside if
	// it must be created: on Citus, on the same shard. A cycle's sink
	// partitions are placed beside its source, whose worker runs the
	// cycle.
	Near uuid.UUID
}

// optionsTTL bounds how long a replica trusts cached queue options and ids:
// configure and delete on another replica reach this one within it.
const optionsTTL = 5 * time.Second

// Catalog caches the queues and partitions the broker looks up: their ids
// and the options it reads in memory. It is safe for concurrent use.
//
// It holds at most size partitions and size queues, and evicts the least
// recently used ones past that: an evicted entry is resolved again from the
// database, so eviction changes no answer. A hit takes only the read lock
// and stamps its entry's last use; the entries are sorted by it only when
// the bound is passed, and then an eighth of them go at once, so that the
// sort is paid once for many inserts.
type Catalog struct {
	db   Store
	size int

	mu     sync.RWMutex
	queues map[queueKey]*queueEntry
	byID   map[uuid.UUID]*slot[*Partition]
	nparts int // partitions cached, over every queue
	// owners are the tenants of the streaming queries looked up, at most
	// size of them. A query's tenant never changes, and a deleted query
	// takes its state with it, so an answer never goes stale.
	owners map[uuid.UUID]string
}

// queueEntry is a cached queue and its cached partitions by name. They
// hang from their queue so that a refresh of its options, every
// optionsTTL, rebinds them without a pass over every other queue's.
type queueEntry struct {
	slot[*Queue]
	parts map[string]*slot[*Partition]
}

// queue returns the cached queue and stamps its use; nil-safe.
func (e *queueEntry) queue(now time.Time) *Queue {
	if e == nil {
		return nil
	}
	return e.get(now)
}

// part returns the named cached partition and stamps its use; nil-safe.
func (e *queueEntry) part(name string, now time.Time) *Partition {
	if e == nil {
		return nil
	}
	return e.parts[name].get(now)
}

// slot is a cached value and when it was last used (Unix nanoseconds).
type slot[T any] struct {
	v    T
	used atomic.Int64
}

func newSlot[T any](v T, now time.Time) *slot[T] {
	s := &slot[T]{v: v}
	s.used.Store(now.UnixNano())
	return s
}

// get returns the value and stamps its use; nil-safe.
func (s *slot[T]) get(now time.Time) (v T) {
	if s == nil {
		return v
	}
	s.used.Store(now.UnixNano())
	return s.v
}

// Store is where the catalog reads and creates queues and partitions:
// broker/pg/db.
type Store interface {
	ResolvePartitions(ctx context.Context, ts []Target) ([]PartitionRow, error)
	LookupQueue(ctx context.Context, tenant, name string) (QueueRow, error)
	LookupPartition(ctx context.Context, queueID uuid.UUID, name string) (uuid.UUID, error)
	// OwnedPartitions answers, in order, each ref's partition, or a row
	// with the nil id when it does not exist or is another tenant's.
	OwnedPartitions(ctx context.Context, refs []Ref) ([]PartitionRow, error)
	// QueryTenant answers the tenant of a streaming query, ErrNotFound
	// when it does not exist.
	QueryTenant(ctx context.Context, id uuid.UUID) (string, error)
}

// Ref is a partition by its id, as a tenant names it.
type Ref struct {
	Tenant string
	ID     uuid.UUID
}

// QueueRow is a queue as the database answers it: its id and the options
// the broker reads in memory.
type QueueRow struct {
	ID                uuid.UUID
	Name              string
	LeaseTime         int // seconds
	RetryLimit        int
	DelayedProcessing int // seconds
	EncryptionEnabled bool
}

// PartitionRow is a partition of a QueueRow.
type PartitionRow struct {
	ID    uuid.UUID
	Name  string
	Queue QueueRow
}

// New returns an empty Catalog over d that caches at most size partitions
// and size queues (at least one of each).
func New(d Store, size int) *Catalog {
	return &Catalog{db: d, size: max(size, 1), queues: map[queueKey]*queueEntry{}, byID: map[uuid.UUID]*slot[*Partition]{},
		owners: map[uuid.UUID]string{}}
}

type queueKey struct{ tenant, name string }

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

// Resolve returns the partition, creating the queue and the partition when
// they do not exist. See ResolveAll.
func (c *Catalog) Resolve(ctx context.Context, t Target) (*Partition, error) {
	ps, err := c.ResolveAll(ctx, []Target{t})
	if err != nil {
		return nil, err
	}
	return ps[0], nil
}

// ResolveAll resolves every target, creating what is missing. Cached answers
// cost nothing; all misses share one round trip. A target whose names break
// the naming rules is a *BadName error; a new queue past the tenant's
// maxQueues is the database's refusal (db.Refusal).
func (c *Catalog) ResolveAll(ctx context.Context, ts []Target) ([]*Partition, error) {
	out := make([]*Partition, len(ts))
	var missing []int
	now := time.Now()
	c.mu.RLock()
	for i, t := range ts {
		if p := c.cachedLocked(t, now); p != nil {
			out[i] = p
		} else {
			missing = append(missing, i)
		}
	}
	c.mu.RUnlock()
	if len(missing) == 0 {
		return out, nil
	}
	for _, i := range missing {
		if err := CheckNames(ts[i].Queue, ts[i].Partition); err != nil {
			return nil, err
		}
	}

	missing, err := c.refresh(ctx, ts, missing, out, now)
	if err != nil || len(missing) == 0 {
		return out, err
	}
	names := make([]Target, len(missing))
	for j, i := range missing {
		names[j] = ts[i]
	}
	found, err := c.db.ResolvePartitions(ctx, names)
	if err != nil {
		return nil, err
	}
	for j, i := range missing {
		out[i] = c.remember(partitionFrom(ts[i].Tenant, found[j], now))
	}
	return out, nil
}

// refresh reads again, by id, the partitions of ts[missing] that the
// catalog still holds past optionsTTL, with their queues' options, into
// out, and returns the indexes it could not: those never seen, and those
// gone since (a deleted partition, or its queue deleted and made again),
// which are looked up by name. A lookup by id reads one partition's row,
// where one by name reads every partition's of the queue: on Citus the
// first is a statement on the partition's own shard and the second one on
// every shard, so that while a node is down, the partitions of the others
// go on being served past a refresh.
func (c *Catalog) refresh(ctx context.Context, ts []Target, missing []int, out []*Partition, now time.Time) ([]int, error) {
	var refs []Ref
	var at []int
	c.mu.RLock()
	for _, i := range missing {
		if p := c.queues[queueKey{ts[i].Tenant, ts[i].Queue}].part(ts[i].Partition, now); p != nil {
			refs, at = append(refs, Ref{Tenant: ts[i].Tenant, ID: p.ID}), append(at, i)
		}
	}
	c.mu.RUnlock()
	if len(refs) == 0 {
		return missing, nil
	}
	found, err := c.db.OwnedPartitions(ctx, refs)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		if f := found[j]; f.ID != uuid.Nil && f.Name == ts[i].Partition && f.Queue.Name == ts[i].Queue {
			out[i] = c.remember(partitionFrom(ts[i].Tenant, f, now))
		}
	}
	return slices.DeleteFunc(missing, func(i int) bool { return out[i] != nil }), nil
}

// queueFrom and partitionFrom make the catalog's values of what the
// database answered at now.
func queueFrom(tenant string, q QueueRow, now time.Time) *Queue {
	return &Queue{ID: q.ID, Tenant: tenant, Name: q.Name, LeaseTime: q.LeaseTime, RetryLimit: q.RetryLimit,
		DelayedProcessing: q.DelayedProcessing, EncryptionEnabled: q.EncryptionEnabled, loaded: now}
}

func partitionFrom(tenant string, p PartitionRow, now time.Time) *Partition {
	return &Partition{ID: p.ID, Name: p.Name, Queue: queueFrom(tenant, p.Queue, now)}
}

func (c *Catalog) cachedLocked(t Target, now time.Time) *Partition {
	e := c.queues[queueKey{t.Tenant, t.Queue}]
	if q := e.queue(now); q == nil || now.Sub(q.loaded) > optionsTTL {
		return nil
	}
	return e.part(t.Partition, now)
}

// remember caches p and returns the cached equivalent. Queue and Partition
// values are never modified once cached: a refresh of the options replaces
// the *Queue and every cached partition that points at it. A partition of a
// queue whose cached options are still in force takes those, and refreshes
// nothing: each new partition of a big queue replaced all its partitions.
func (c *Catalog) remember(p *Partition) *Partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	e := c.queues[queueKey{p.Queue.Tenant, p.Queue.Name}]
	if q := e.queue(now); q == nil || q.ID != p.Queue.ID || p.Queue.loaded.Sub(q.loaded) > optionsTTL {
		e = c.setQueueLocked(p.Queue)
	}
	q := e.v
	cur := e.parts[p.Name]
	if cur != nil && cur.v.ID == p.ID && cur.v.Queue == q {
		return cur.get(now)
	}
	if cur != nil {
		delete(c.byID, cur.v.ID)
	} else {
		c.nparts++
	}
	p = &Partition{ID: p.ID, Name: p.Name, Queue: q}
	s := newSlot(p, now)
	e.parts[p.Name] = s
	c.byID[p.ID] = s
	c.evictLocked()
	return p
}

// rememberQueue caches q alone (a pop or configure resolved it).
func (c *Catalog) rememberQueue(q *Queue) *Queue {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setQueueLocked(q).v
}

// setQueueLocked installs q unless a fresher copy is cached, and returns the
// entry of the copy in force.
func (c *Catalog) setQueueLocked(q *Queue) *queueEntry {
	key := queueKey{q.Tenant, q.Name}
	now := time.Now()
	e := c.queues[key]
	old := e.queue(now)
	switch {
	case old == nil:
	case old.ID != q.ID:
		c.dropLocked(old) // deleted and recreated, maybe on another replica
		e = nil
	case !q.loaded.After(old.loaded):
		return e
	default:
		for _, s := range e.parts {
			// The slot is shared with byID: both see the new value.
			s.v = &Partition{ID: s.v.ID, Name: s.v.Name, Queue: q}
		}
	}
	if e == nil {
		e = &queueEntry{parts: map[string]*slot[*Partition]{}}
		c.queues[key] = e
	}
	e.v = q
	e.used.Store(now.UnixNano())
	c.evictLocked()
	return e
}

func (c *Catalog) dropLocked(q *Queue) {
	c.dropQueuesLocked(map[uuid.UUID]bool{q.ID: true})
}

// dropQueuesLocked forgets the queues with the ids in gone and their
// partitions.
func (c *Catalog) dropQueuesLocked(gone map[uuid.UUID]bool) {
	for k, e := range c.queues {
		if gone[e.v.ID] {
			for _, s := range e.parts {
				delete(c.byID, s.v.ID)
			}
			c.nparts -= len(e.parts)
			delete(c.queues, k)
		}
	}
}

// evictLocked brings the partitions, then the queues, back under the
// bound when they pass it, dropping the least recently used down to seven
// eighths of it. An evicted queue takes its partitions with it, since a
// partition is found through its queue.
func (c *Catalog) evictLocked() {
	keep := c.size - c.size/8
	if c.nparts > c.size {
		type part struct {
			e    *queueEntry
			name string
			s    *slot[*Partition]
		}
		all := make([]part, 0, c.nparts)
		for _, e := range c.queues {
			for name, s := range e.parts {
				all = append(all, part{e, name, s})
			}
		}
		for _, p := range leastUsed(all, c.nparts-keep, func(p part) int64 { return p.s.used.Load() }) {
			delete(c.byID, p.s.v.ID)
			delete(p.e.parts, p.name)
		}
		c.nparts = keep
	}
	if len(c.queues) > c.size {
		all := make([]*queueEntry, 0, len(c.queues))
		for _, e := range c.queues {
			all = append(all, e)
		}
		gone := map[uuid.UUID]bool{}
		for _, e := range leastUsed(all, len(all)-keep, func(e *queueEntry) int64 { return e.used.Load() }) {
			gone[e.v.ID] = true
		}
		c.dropQueuesLocked(gone)
	}
}

// leastUsed returns the n of all that were used least recently.
func leastUsed[T any](all []T, n int, used func(T) int64) []T {
	type use struct {
		v  T
		at int64
	}
	us := make([]use, len(all))
	for i, v := range all {
		us[i] = use{v, used(v)}
	}
	slices.SortFunc(us, func(a, b use) int { return cmp.Compare(a.at, b.at) })
	out := make([]T, n)
	for i := range out {
		out[i] = us[i].v
	}
	return out
}

// forget drops the cached partition t, which the database no longer holds:
// the refresh of its queue's options would otherwise rebind its old id.
func (c *Catalog) forget(t Target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.queues[queueKey{t.Tenant, t.Queue}]; e != nil && e.parts[t.Partition] != nil {
		delete(c.byID, e.parts[t.Partition].v.ID)
		delete(e.parts, t.Partition)
		c.nparts--
	}
}

// Invalidate forgets everything cached about a tenant's queue.
func (c *Catalog) Invalidate(tenant, queue string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.queues[queueKey{tenant, queue}]; e != nil {
		c.dropLocked(e.v)
	}
}

// ForgetQueueID forgets a queue deleted on any replica.
func (c *Catalog) ForgetQueueID(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropQueuesLocked(map[uuid.UUID]bool{id: true})
}

// LookupQueue returns a tenant's queue without creating it: ErrNotFound when
// it does not exist.
func (c *Catalog) LookupQueue(ctx context.Context, tenant, name string) (*Queue, error) {
	now := time.Now()
	c.mu.RLock()
	q := c.queues[queueKey{tenant, name}].queue(now)
	c.mu.RUnlock()
	if q != nil && now.Sub(q.loaded) <= optionsTTL {
		return q, nil
	}
	found, err := c.db.LookupQueue(ctx, tenant, name)
	if errors.Is(err, ErrNotFound) {
		c.Invalidate(tenant, name)
	}
	if err != nil {
		return nil, err
	}
	return c.rememberQueue(queueFrom(tenant, found, now)), nil
}

// LookupPartition returns a partition of a tenant's queue by name without
// creating it: ErrNotFound when either does not exist.
func (c *Catalog) LookupPartition(ctx context.Context, tenant, queue, partition string) (*Partition, error) {
	t := Target{Tenant: tenant, Queue: queue, Partition: partition}
	c.mu.RLock()
	p := c.cachedLocked(t, time.Now())
	c.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	out := make([]*Partition, 1)
	if missing, err := c.refresh(ctx, []Target{t}, []int{0}, out, time.Now()); err != nil || len(missing) == 0 {
		return out[0], err
	}
	q, err := c.LookupQueue(ctx, tenant, queue)
	if err != nil {
		return nil, err
	}
	id, err := c.db.LookupPartition(ctx, q.ID, partition)
	if errors.Is(err, ErrNotFound) {
		c.forget(t)
	}
	if err != nil {
		return nil, err
	}
	return c.remember(&Partition{ID: id, Name: partition, Queue: q}), nil
}

// OwnedPartition returns the partition with id when it belongs to tenant,
// and ErrNotFound when it does not exist or belongs to another tenant. A
// cached answer costs no round trip.
func (c *Catalog) OwnedPartition(ctx context.Context, tenant string, id uuid.UUID) (*Partition, error) {
	now := time.Now()
	c.mu.RLock()
	p := c.byID[id].get(now)
	c.mu.RUnlock()
	if p != nil && now.Sub(p.Queue.loaded) <= optionsTTL {
		if p.Queue.Tenant != tenant {
			return nil, ErrNotFound
		}
		return p, nil
	}
	found, err := c.db.OwnedPartitions(ctx, []Ref{{Tenant: tenant, ID: id}})
	if err != nil {
		return nil, err
	}
	if found[0].ID == uuid.Nil {
		return nil, ErrNotFound
	}
	return c.remember(partitionFrom(tenant, found[0], now)), nil
}

// OwnsQuery reports whether the streaming query id exists and is tenant's:
// false alike for another tenant's and for none, so that a foreign id looks
// exactly like an unknown one. A cached answer costs no round trip; only
// queries that exist are cached, so one registered later is found.
func (c *Catalog) OwnsQuery(ctx context.Context, tenant string, id uuid.UUID) (bool, error) {
	c.mu.RLock()
	owner, ok := c.owners[id]
	c.mu.RUnlock()
	if ok {
		return owner == tenant, nil
	}
	owner, err := c.db.QueryTenant(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.owners) >= c.size {
		// Any eighth goes: every answer is as good as another, and a
		// dropped one is read again.
		n := max(c.size/8, 1)
		for k := range c.owners {
			if n--; n < 0 {
				break
			}
			delete(c.owners, k)
		}
	}
	c.owners[id] = owner
	return owner == tenant, nil
}
