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
}

// optionsTTL bounds how long a replica trusts cached queue options and ids:
// configure and delete on another replica reach this one within it.
const optionsTTL = 5 * time.Second

// DefaultSize is the default bound on the partitions, and on the queues,
// that a Catalog caches.
const DefaultSize = 100_000

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
	queues map[queueKey]*slot[*Queue]
	parts  map[partKey]*slot[*Partition]
	byID   map[uuid.UUID]*slot[*Partition]
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
// broker/db.
type Store interface {
	ResolvePartitions(ctx context.Context, ts []Target) ([]PartitionRow, error)
	LookupQueue(ctx context.Context, tenant, name string) (QueueRow, error)
	LookupPartition(ctx context.Context, queueID uuid.UUID, name string) (uuid.UUID, error)
	OwnedPartition(ctx context.Context, tenant string, id uuid.UUID) (PartitionRow, error)
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
	return &Catalog{db: d, size: max(size, 1), queues: map[queueKey]*slot[*Queue]{},
		parts: map[partKey]*slot[*Partition]{}, byID: map[uuid.UUID]*slot[*Partition]{}}
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
	q := c.queues[queueKey{t.Tenant, t.Queue}].get(now)
	if q == nil || now.Sub(q.loaded) > optionsTTL {
		return nil
	}
	return c.parts[partKey{t.Tenant, t.Queue, t.Partition}].get(now)
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
	q := c.queues[queueKey{p.Queue.Tenant, p.Queue.Name}].get(now)
	if q == nil || q.ID != p.Queue.ID || p.Queue.loaded.Sub(q.loaded) > optionsTTL {
		q = c.setQueueLocked(p.Queue)
	}
	k := partKey{q.Tenant, q.Name, p.Name}
	cur := c.parts[k]
	if cur != nil && cur.v.ID == p.ID && cur.v.Queue == q {
		return cur.get(now)
	}
	if cur != nil {
		delete(c.byID, cur.v.ID)
	}
	p = &Partition{ID: p.ID, Name: p.Name, Queue: q}
	s := newSlot(p, now)
	c.parts[k] = s
	c.byID[p.ID] = s
	c.evictLocked()
	return p
}

// rememberQueue caches q alone (a pop or configure resolved it).
func (c *Catalog) rememberQueue(q *Queue) *Queue {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setQueueLocked(q)
}

// setQueueLocked installs q unless a fresher copy is cached, and returns the
// copy in force.
func (c *Catalog) setQueueLocked(q *Queue) *Queue {
	key := queueKey{q.Tenant, q.Name}
	now := time.Now()
	old := c.queues[key].get(now)
	switch {
	case old == nil:
	case old.ID != q.ID:
		c.dropLocked(old) // deleted and recreated, maybe on another replica
	case !q.loaded.After(old.loaded):
		return old
	default:
		for _, s := range c.parts {
			if p := s.v; p.Queue == old {
				// The slot is shared with byID: both see the new value.
				s.v = &Partition{ID: p.ID, Name: p.Name, Queue: q}
			}
		}
	}
	c.queues[key] = newSlot(q, now)
	c.evictLocked()
	return q
}

func (c *Catalog) dropLocked(q *Queue) {
	c.dropQueuesLocked(map[uuid.UUID]bool{q.ID: true})
}

// dropQueuesLocked forgets the queues with the ids in gone and their
// partitions, in one pass over the partitions.
func (c *Catalog) dropQueuesLocked(gone map[uuid.UUID]bool) {
	for k, s := range c.queues {
		if gone[s.v.ID] {
			delete(c.queues, k)
		}
	}
	for k, s := range c.parts {
		if gone[s.v.Queue.ID] {
			delete(c.parts, k)
			delete(c.byID, s.v.ID)
		}
	}
}

// evictLocked brings the partitions, then the queues, back under the
// bound when they pass it, dropping the least recently used down to seven
// eighths of it. An evicted queue takes its partitions with it, since a
// partition is found through its queue.
func (c *Catalog) evictLocked() {
	keep := c.size - c.size/8
	if len(c.parts) > c.size {
		for _, k := range leastUsed(c.parts, len(c.parts)-keep) {
			delete(c.byID, c.parts[k].v.ID)
			delete(c.parts, k)
		}
	}
	if len(c.queues) > c.size {
		gone := map[uuid.UUID]bool{}
		for _, k := range leastUsed(c.queues, len(c.queues)-keep) {
			gone[c.queues[k].v.ID] = true
		}
		c.dropQueuesLocked(gone)
	}
}

// leastUsed returns the keys of the n least recently used slots of m.
func leastUsed[K comparable, T any](m map[K]*slot[T], n int) []K {
	type use struct {
		k  K
		at int64
	}
	all := make([]use, 0, len(m))
	for k, s := range m {
		all = append(all, use{k, s.used.Load()})
	}
	slices.SortFunc(all, func(a, b use) int { return cmp.Compare(a.at, b.at) })
	out := make([]K, n)
	for i := range out {
		out[i] = all[i].k
	}
	return out
}

// Invalidate forgets everything cached about a tenant's queue.
func (c *Catalog) Invalidate(tenant, queue string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.queues[queueKey{tenant, queue}]; s != nil {
		c.dropLocked(s.v)
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
	q := c.queues[queueKey{tenant, name}].get(now)
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
	t := Target{tenant, queue, partition}
	c.mu.RLock()
	p := c.cachedLocked(t, time.Now())
	c.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	q, err := c.LookupQueue(ctx, tenant, queue)
	if err != nil {
		return nil, err
	}
	id, err := c.db.LookupPartition(ctx, q.ID, partition)
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
	found, err := c.db.OwnedPartition(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return c.remember(partitionFrom(tenant, found, now)), nil
}
