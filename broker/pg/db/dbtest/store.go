package dbtest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// DeadLetter is a dead letter of a queue, as stored.
type DeadLetter struct {
	MessageID string
	Payload   string
}

// DeadLetters lists the dead letters of a tenant's queue, by message id.
func (d *DB) DeadLetters(ctx context.Context, tenant, queue string) ([]DeadLetter, error) {
	rows, err := d.pool.Query(ctx, `SELECT l.message_id::text, convert_from(l.payload, 'UTF8') FROM queen.dead_letters l
		  JOIN queen.partitions p ON p.id = l.partition_id JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND q.name = $2 ORDER BY l.message_id`, tenant, queue)
	if err != nil {
		return nil, fmt.Errorf("read the dead letters of %q: %w", queue, err)
	}
	letters, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DeadLetter])
	if err != nil {
		return nil, fmt.Errorf("read the dead letters of %q: %w", queue, err)
	}
	return letters, nil
}

// ShiftChecksums moves the checksum of every segment of a tenant's queue
// by by: a segment that fails its check, as a disk that lied leaves it, or,
// shifted back, one mended.
func (d *DB) ShiftChecksums(ctx context.Context, tenant, queue string, by int64) error {
	_, err := d.pool.Exec(ctx, `UPDATE queen.log_segments s SET checksum = s.checksum + $3
		  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE p.id = s.partition_id AND q.tenant = $1 AND q.name = $2`, tenant, queue, by)
	if err != nil {
		return fmt.Errorf("shift the checksums of %q: %w", queue, err)
	}
	return nil
}

// ClaimFrames makes every segment of a tenant's queue claim n frames,
// whatever its body holds: a corrupt frame count.
func (d *DB) ClaimFrames(ctx context.Context, tenant, queue string, n int) error {
	_, err := d.pool.Exec(ctx, `UPDATE queen.log_segments s SET frame_count = $3
		  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE p.id = s.partition_id AND q.tenant = $1 AND q.name = $2`, tenant, queue, n)
	if err != nil {
		return fmt.Errorf("make the segments of %q claim %d frames: %w", queue, n, err)
	}
	return nil
}

// LockCursor holds the row of group's cursor on a partition of a tenant's
// queue, as a pop claiming it would, until release: whoever claims it
// meanwhile finds it busy or waits.
func (d *DB) LockCursor(ctx context.Context, tenant, queue, partition, group string) (release func() error, err error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock the cursor of %s on %q/%s: %w", group, queue, partition, err)
	}
	tag, err := tx.Exec(ctx, `SELECT FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND q.name = $2 AND p.name = $3 AND c.consumer_group = $4 FOR UPDATE OF c`, tenant, queue, partition, group)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("no such cursor")
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("lock the cursor of %s on %q/%s: %w", group, queue, partition, err)
	}
	return func() error { return tx.Rollback(context.WithoutCancel(ctx)) }, nil
}
