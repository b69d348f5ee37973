package log

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/regent-mq/regent/broker/catalog"
	"github.com/regent-mq/regent/broker/db"
)

// Target names a partition by tenant, queue and partition name.
type Target struct {
	Tenant, Queue, Partition string
}

// Resolve returns the partition, creating the queue and the partition when
// they do not exist. See ResolveAll.
func (l *Log) Resolve(ctx context.Context, t Target) (*Partition, error) {
	ps, err := l.ResolveAll(ctx, []Target{t})
	if err != nil {
		return nil, err
	}
	return ps[0], nil
}

// ResolveAll resolves every target, creating what is missing. Cached answers
// cost nothing; all misses share one round trip. A target whose names break
// the naming rules is a *catalog.BadName error.
func (l *Log) ResolveAll(ctx context.Context, ts []Target) ([]*Partition, error) {
	out := make([]*Partition, len(ts))
	var missing []int
	now := time.Now()
	l.mu.RLock()
	for i, t := range ts {
		if p := l.cachedLocked(t, now); p != nil {
			out[i] = p
		} else {
			missing = append(missing, i)
		}
	}
	l.mu.RUnlock()
	if len(missing) == 0 {
		return out, nil
	}
	for _, i := range missing {
		if err := catalog.CheckNames(ts[i].Queue, ts[i].Partition); err != nil {
			return nil, err
		}
	}

	names := make([]db.PartitionName, len(missing))
	for j, i := range missing {
		names[j] = db.PartitionName(ts[i])
	}
	found, err := l.db.ResolvePartitions(ctx, names)
	if err != nil {
		// A new queue past the tenant's maxQueues is refused in the batch.
		return nil, l.quotas.FromSQL(ts[missing[0]].Tenant, err)
	}
	for j, i := range missing {
		out[i] = l.remember(partitionFrom(ts[i].Tenant, found[j], now))
	}
	return out, nil
}

// queueFrom and partitionFrom make the catalog's values of what the
// database answered at now.
func queueFrom(tenant string, q db.CatalogQueue, now time.Time) *Queue {
	return &Queue{ID: q.ID, Tenant: tenant, Name: q.Name, LeaseTime: q.LeaseTime, RetryLimit: q.RetryLimit,
		DelayedProcessing: q.DelayedProcessing, EncryptionEnabled: q.EncryptionEnabled, loaded: now}
}

func partitionFrom(tenant string, p db.CatalogPartition, now time.Time) *Partition {
	return &Partition{ID: p.ID, Name: p.Name, Queue: queueFrom(tenant, p.Queue, now)}
}

func (l *Log) cachedLocked(t Target, now time.Time) *Partition {
	q := l.queues[queueKey{t.Tenant, t.Queue}]
	if q == nil || now.Sub(q.loaded) > optionsTTL {
		return nil
	}
	return l.parts[partKey{t.Tenant, t.Queue, t.Partition}]
}

// remember caches p and returns the cached equivalent. Queue and Partition
// values are never modified once cached: a refresh of the options replaces
// the *Queue and every cached partition that points at it. A partition of a
// queue whose cached options are still in force takes those, and refreshes
// nothing: each new partition of a big queue replaced all its partitions.
func (l *Log) remember(p *Partition) *Partition {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[queueKey{p.Queue.Tenant, p.Queue.Name}]
	if q == nil || q.ID != p.Queue.ID || p.Queue.loaded.Sub(q.loaded) > optionsTTL {
		q = l.setQueueLocked(p.Queue)
	}
	k := partKey{q.Tenant, q.Name, p.Name}
	if cur := l.parts[k]; cur != nil && cur.ID == p.ID && cur.Queue == q {
		return cur
	}
	if cur := l.parts[k]; cur != nil {
		delete(l.byID, cur.ID)
	}
	p = &Partition{ID: p.ID, Name: p.Name, Queue: q}
	l.parts[k] = p
	l.byID[p.ID] = p
	return p
}

// rememberQueue caches q alone (a pop or configure resolved it).
func (l *Log) rememberQueue(q *Queue) *Queue {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.setQueueLocked(q)
}

// setQueueLocked installs q unless a fresher copy is cached, and returns the
// copy in force.
func (l *Log) setQueueLocked(q *Queue) *Queue {
	key := queueKey{q.Tenant, q.Name}
	old := l.queues[key]
	switch {
	case old == nil:
	case old.ID != q.ID:
		l.dropLocked(old) // deleted and recreated, maybe on another replica
	case !q.loaded.After(old.loaded):
		return old
	default:
		for k, p := range l.parts {
			if p.Queue == old {
				np := &Partition{ID: p.ID, Name: p.Name, Queue: q}
				l.parts[k] = np
				l.byID[p.ID] = np
			}
		}
	}
	l.queues[key] = q
	return q
}

func (l *Log) dropLocked(q *Queue) {
	delete(l.queues, queueKey{q.Tenant, q.Name})
	for k, p := range l.parts {
		if p.Queue.ID == q.ID {
			delete(l.parts, k)
			delete(l.byID, p.ID)
		}
	}
}

// Invalidate forgets everything cached about a tenant's queue.
func (l *Log) Invalidate(tenant, queue string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.queues[queueKey{tenant, queue}]; q != nil {
		l.dropLocked(q)
	}
}

// ForgetQueueID forgets a queue deleted on any replica.
func (l *Log) ForgetQueueID(id uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.queues {
		if q.ID == id {
			l.dropLocked(q)
			return
		}
	}
}

// LookupQueue returns a tenant's queue without creating it: catalog.ErrNotFound when
// it does not exist.
func (l *Log) LookupQueue(ctx context.Context, tenant, name string) (*Queue, error) {
	now := time.Now()
	l.mu.RLock()
	q := l.queues[queueKey{tenant, name}]
	l.mu.RUnlock()
	if q != nil && now.Sub(q.loaded) <= optionsTTL {
		return q, nil
	}
	found, err := l.db.LookupQueue(ctx, tenant, name)
	if errors.Is(err, catalog.ErrNotFound) {
		l.Invalidate(tenant, name)
	}
	if err != nil {
		return nil, err
	}
	return l.rememberQueue(queueFrom(tenant, found, now)), nil
}

// LookupPartition returns a partition of a tenant's queue by name without
// creating it: catalog.ErrNotFound when either does not exist.
func (l *Log) LookupPartition(ctx context.Context, tenant, queue, partition string) (*Partition, error) {
	t := Target{tenant, queue, partition}
	l.mu.RLock()
	p := l.cachedLocked(t, time.Now())
	l.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	q, err := l.LookupQueue(ctx, tenant, queue)
	if err != nil {
		return nil, err
	}
	id, err := l.db.LookupPartition(ctx, q.ID, partition)
	if err != nil {
		return nil, err
	}
	return l.remember(&Partition{ID: id, Name: partition, Queue: q}), nil
}

// OwnedPartition returns the partition with id when it belongs to tenant,
// and catalog.ErrNotFound when it does not exist or belongs to another tenant. A
// cached answer costs no round trip.
func (l *Log) OwnedPartition(ctx context.Context, tenant string, id uuid.UUID) (*Partition, error) {
	now := time.Now()
	l.mu.RLock()
	p := l.byID[id]
	l.mu.RUnlock()
	if p != nil && now.Sub(p.Queue.loaded) <= optionsTTL {
		if p.Queue.Tenant != tenant {
			return nil, catalog.ErrNotFound
		}
		return p, nil
	}
	found, err := l.db.OwnedPartition(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return l.remember(partitionFrom(tenant, found, now)), nil
}
