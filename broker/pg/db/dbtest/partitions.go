package dbtest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Partition is one partition of a queue, as stored.
type Partition struct {
	ID, Name                string
	NextOffset, FloorOffset int64
	LastPushAt              *time.Time // nil: never pushed to
}

// Partitions lists the partitions of a tenant's queue by name.
func (d *DB) Partitions(ctx context.Context, tenant, queue string) ([]Partition, error) {
	rows, err := d.pool.Query(ctx, `SELECT p.id::text, p.name, p.next_offset, p.floor_offset, p.last_push_at
		  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND q.name = $2 ORDER BY p.name`, tenant, queue)
	if err != nil {
		return nil, fmt.Errorf("read the partitions of %q: %w", queue, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partition, error) {
		var p Partition
		err := r.Scan(&p.ID, &p.Name, &p.NextOffset, &p.FloorOffset, &p.LastPushAt)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the partitions of %q: %w", queue, err)
	}
	return out, nil
}

// DeletePartition deletes a partition of a tenant's queue behind the
// broker's back, as another replica would: what this one caches of it is
// then stale.
func (d *DB) DeletePartition(ctx context.Context, tenant, queue, partition string) error {
	tag, err := d.pool.Exec(ctx, `DELETE FROM queen.partitions p USING queen.queues q
		 WHERE q.id = p.queue_id AND q.tenant = $1 AND q.name = $2 AND p.name = $3`, tenant, queue, partition)
	if err != nil {
		return fmt.Errorf("delete partition %s of %q: %w", partition, queue, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("delete partition %s of %q: no such partition", partition, queue)
	}
	return nil
}

// DeleteQueue deletes a tenant's queue behind the broker's back, as another
// replica would.
func (d *DB) DeleteQueue(ctx context.Context, tenant, queue string) error {
	tag, err := d.pool.Exec(ctx, `DELETE FROM queen.queues WHERE tenant = $1 AND name = $2`, tenant, queue)
	if err != nil {
		return fmt.Errorf("delete queue %q: %w", queue, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("delete queue %q: no such queue", queue)
	}
	return nil
}
