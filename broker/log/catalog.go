package log

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/regent-mq/regent/broker/pg"
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
// the naming rules is a *BadName error.
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
		if err := CheckNames(ts[i].Queue, ts[i].Partition); err != nil {
			return nil, err
		}
	}

	b := &pgx.Batch{}
	for _, i := range missing {
		t := ts[i]
		b.Queue(`SELECT queue_id, partition_id, lease_time, retry_limit, delayed_processing, encryption_enabled
			FROM queen.resolve_partition_v2(p_tenant => $1, p_queue => $2, p_partition => $3, p_create => true,
				p_new_queue_id => $4, p_new_partition_id => $5)`,
			t.Tenant, t.Queue, t.Partition, pg.NewID(), pg.NewID()).QueryRow(func(row pgx.Row) error {
			q := &Queue{Tenant: t.Tenant, Name: t.Queue, loaded: now}
			p := &Partition{Name: t.Partition, Queue: q}
			if err := row.Scan(&q.ID, &p.ID, &q.LeaseTime, &q.RetryLimit, &q.DelayedProcessing, &q.EncryptionEnabled); err != nil {
				return fmt.Errorf("resolve queue %q partition %q: %w", t.Queue, t.Partition, err)
			}
			out[i] = l.remember(p)
			return nil
		})
	}
	if err := l.pool.SendBatch(ctx, b).Close(); err != nil {
		// A new queue past the tenant's maxQueues is refused in the batch.
		return nil, l.quotas.FromSQL(ts[missing[0]].Tenant, err)
	}
	return out, nil
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

// LookupQueue returns a tenant's queue without creating it: ErrNotFound when
// it does not exist.
func (l *Log) LookupQueue(ctx context.Context, tenant, name string) (*Queue, error) {
	now := time.Now()
	l.mu.RLock()
	q := l.queues[queueKey{tenant, name}]
	l.mu.RUnlock()
	if q != nil && now.Sub(q.loaded) <= optionsTTL {
		return q, nil
	}
	q = &Queue{Tenant: tenant, Name: name, loaded: now}
	err := l.pool.QueryRow(ctx, `SELECT id, lease_time, retry_limit, delayed_processing, encryption_enabled
		FROM queen.queues WHERE tenant = $1 AND name = $2`, tenant, name).
		Scan(&q.ID, &q.LeaseTime, &q.RetryLimit, &q.DelayedProcessing, &q.EncryptionEnabled)
	if errors.Is(err, pgx.ErrNoRows) {
		l.Invalidate(tenant, name)
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up queue %q: %w", name, err)
	}
	return l.rememberQueue(q), nil
}

// LookupPartition returns a partition of a tenant's queue by name without
// creating it: ErrNotFound when either does not exist.
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
	p = &Partition{Name: partition, Queue: q}
	err = l.pool.QueryRow(ctx, `SELECT id FROM queen.partitions WHERE queue_id = $1 AND name = $2`, q.ID, partition).Scan(&p.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up partition %q of queue %q: %w", partition, queue, err)
	}
	return l.remember(p), nil
}

// OwnedPartition returns the partition with id when it belongs to tenant,
// and ErrNotFound when it does not exist or belongs to another tenant. A
// cached answer costs no round trip.
func (l *Log) OwnedPartition(ctx context.Context, tenant string, id uuid.UUID) (*Partition, error) {
	now := time.Now()
	l.mu.RLock()
	p := l.byID[id]
	l.mu.RUnlock()
	if p != nil && now.Sub(p.Queue.loaded) <= optionsTTL {
		if p.Queue.Tenant != tenant {
			return nil, ErrNotFound
		}
		return p, nil
	}
	q := &Queue{Tenant: tenant, loaded: now}
	p = &Partition{ID: id, Queue: q}
	err := l.pool.QueryRow(ctx, `SELECT p.name, q.id, q.name, q.lease_time, q.retry_limit, q.delayed_processing, q.encryption_enabled
		FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		WHERE p.id = $1 AND q.tenant = $2`, id, tenant).
		Scan(&p.Name, &q.ID, &q.Name, &q.LeaseTime, &q.RetryLimit, &q.DelayedProcessing, &q.EncryptionEnabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up partition %s: %w", id, err)
	}
	return l.remember(p), nil
}

// BadName is a queue or partition name that breaks the naming rules.
type BadName struct{ Message string }

func (e *BadName) Error() string { return e.Message }

func CheckNames(queue, partition string) error {
	if err := CheckQueueName(queue); err != nil {
		return err
	}
	if partition == "" || len(partition) > maxPartitionName {
		return &BadName{fmt.Sprintf("Invalid partition name %q: use 1-%d bytes", partition, maxPartitionName)}
	}
	return nil
}

// CheckQueueName applies the queue-name rule of queue-api.md.
func CheckQueueName(queue string) error {
	if !queueName.MatchString(queue) {
		return &BadName{fmt.Sprintf("Invalid queue name %q: use 1-255 letters, digits, '_', '.' or '-'", queue)}
	}
	return nil
}
