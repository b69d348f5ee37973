package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/ids"
)

var _ catalog.Store = (*DB)(nil)

// ResolvePartitions returns the partitions names name, in order, creating
// the queues and partitions that do not exist with default options
// (queen.resolve_partition_v2), all in one round trip, a new partition
// beside its target's Near (queen.partition_id_near). A new queue past
// the tenant's maxQueues is refused (Refusal).
func (d *DB) ResolvePartitions(ctx context.Context, names []catalog.Target) ([]catalog.PartitionRow, error) {
	out := make([]catalog.PartitionRow, len(names))
	b := &pgx.Batch{}
	for i, n := range names {
		b.Queue(`SELECT queue_id, partition_id, lease_time, retry_limit, delayed_processing, encryption_enabled
			FROM queen.resolve_partition_v2(p_tenant => $1, p_queue => $2, p_partition => $3, p_create => true,
				p_new_queue_id => $4, p_new_partition_id => queen.partition_id_near(p_new => $5, p_near => $6))`,
			n.Tenant, n.Queue, n.Partition, ids.New(), ids.New(), pgtype.UUID{Bytes: n.Near, Valid: n.Near != uuid.Nil}).QueryRow(func(row pgx.Row) error {
			p := &out[i]
			p.Name, p.Queue.Name = n.Partition, n.Queue
			if err := row.Scan(&p.Queue.ID, &p.ID, &p.Queue.LeaseTime, &p.Queue.RetryLimit, &p.Queue.DelayedProcessing,
				&p.Queue.EncryptionEnabled); err != nil {
				return fmt.Errorf("resolve queue %q partition %q: %w", n.Queue, n.Partition, err)
			}
			return nil
		})
	}
	if err := d.q.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return out, nil
}

// LookupQueue returns a tenant's queue without creating it:
// catalog.ErrNotFound when it does not exist.
func (d *DB) LookupQueue(ctx context.Context, tenant, name string) (catalog.QueueRow, error) {
	q := catalog.QueueRow{Name: name}
	err := d.q.QueryRow(ctx, `SELECT id, lease_time, retry_limit, delayed_processing, encryption_enabled
		FROM queen.queues WHERE tenant = $1 AND name = $2`, tenant, name).
		Scan(&q.ID, &q.LeaseTime, &q.RetryLimit, &q.DelayedProcessing, &q.EncryptionEnabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return q, catalog.ErrNotFound
	}
	if err != nil {
		return q, fmt.Errorf("look up queue %q: %w", name, err)
	}
	return q, nil
}

// LookupPartition returns the id of a queue's partition by name without
// creating it: catalog.ErrNotFound when it does not exist.
func (d *DB) LookupPartition(ctx context.Context, queueID uuid.UUID, name string) (uuid.UUID, error) {
	var id uuid.UUID
	err := d.q.QueryRow(ctx, `SELECT id FROM queen.partitions WHERE queue_id = $1 AND name = $2`, queueID, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return id, catalog.ErrNotFound
	}
	if err != nil {
		return id, fmt.Errorf("look up partition %q: %w", name, err)
	}
	return id, nil
}

// OwnedPartitions returns, for each of refs in order, the partition with
// its id and its queue when they belong to its tenant, or a row with the
// nil id when it does not exist or belongs to another tenant, the two
// indistinguishable on purpose (the tenancy gate). All in one round trip,
// a statement per partition: on Citus each reads the partition's own shard
// (and the queues, a reference table), so a node that is down fails only
// the lookups of its partitions.
func (d *DB) OwnedPartitions(ctx context.Context, refs []catalog.Ref) ([]catalog.PartitionRow, error) {
	out := make([]catalog.PartitionRow, len(refs))
	b := &pgx.Batch{}
	for i, r := range refs {
		b.Queue(`SELECT p.name, q.id, q.name, q.lease_time, q.retry_limit, q.delayed_processing, q.encryption_enabled
			FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
			WHERE p.id = $1 AND q.tenant = $2`, r.ID, r.Tenant).QueryRow(func(row pgx.Row) error {
			p := &out[i]
			q := &p.Queue
			err := row.Scan(&p.Name, &q.ID, &q.Name, &q.LeaseTime, &q.RetryLimit, &q.DelayedProcessing, &q.EncryptionEnabled)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("look up partition %s: %w", r.ID, err)
			}
			p.ID = r.ID
			return nil
		})
	}
	if err := d.q.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return out, nil
}

// QueryTenant returns the tenant of the streaming query id:
// catalog.ErrNotFound when it does not exist.
func (d *DB) QueryTenant(ctx context.Context, id uuid.UUID) (string, error) {
	var tenant string
	err := d.q.QueryRow(ctx, `SELECT tenant FROM queen_streams.queries WHERE id = $1`, id).Scan(&tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", catalog.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("look up query %s: %w", id, err)
	}
	return tenant, nil
}
