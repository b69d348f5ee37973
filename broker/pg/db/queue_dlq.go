package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/domain/segment"
)

// DeadLetter is a message that went to the dead letter queue, its payload
// opened.
type DeadLetter struct {
	ID            uuid.UUID
	TransactionID string
	PartitionID   uuid.UUID
	Queue         string
	Partition     string
	ConsumerGroup string
	ErrorMessage  *string
	RetryCount    int
	Data          []byte // raw JSON
	CreatedAt     time.Time
	FailedAt      time.Time
}

// DeadLetterFilter selects dead letters; an empty Queue or Group matches
// all.
type DeadLetterFilter struct {
	Tenant, Queue, Group string
	Limit, Offset        int
}

// DeadLetters returns the tenant's dead letters that f selects, newest
// first, their payloads opened by open, and how many there are in all.
func (d *DB) DeadLetters(ctx context.Context, f DeadLetterFilter, open func(*segment.Frame) ([]byte, error)) (int, []DeadLetter, error) {
	const where = ` FROM queen.dead_letters d
		JOIN queen.partitions p ON p.id = d.partition_id
		JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.tenant = $1 AND ($2 = '' OR q.name = $2) AND ($3 = '' OR d.consumer_group = $3)`
	var total int
	var out []DeadLetter
	b := &pgx.Batch{}
	b.Queue(`SELECT count(*)`+where, f.Tenant, f.Queue, f.Group).QueryRow(func(row pgx.Row) error { return row.Scan(&total) })
	b.Queue(`SELECT d.message_id, d.transaction_id, d.partition_id, q.name, p.name, d.consumer_group,
			d.error_message, d.retry_count, d.payload, d.key_id, d.created_at, d.failed_at`+where+`
		ORDER BY d.failed_at DESC, d.message_id LIMIT $4 OFFSET $5`, f.Tenant, f.Queue, f.Group, f.Limit, f.Offset).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var l DeadLetter
				var payload []byte
				var key pgtype.Int8
				if err := rows.Scan(&l.ID, &l.TransactionID, &l.PartitionID, &l.Queue, &l.Partition, &l.ConsumerGroup,
					&l.ErrorMessage, &l.RetryCount, &payload, &key, &l.CreatedAt, &l.FailedAt); err != nil {
					return err
				}
				fr := segment.Frame{Payload: payload}
				if key.Valid {
					fr.Flags, fr.KeyID = segment.FlagSealed, uint32(key.Int64)
				}
				data, err := open(&fr)
				if err != nil {
					return err
				}
				l.Data = data
				out = append(out, l)
			}
			return rows.Err()
		})
	if err := d.q.SendBatch(ctx, b).Close(); err != nil {
		return 0, nil, fmt.Errorf("list dead letters: %w", err)
	}
	return total, out, nil
}
