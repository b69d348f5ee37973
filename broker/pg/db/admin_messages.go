package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/ids"
)

// Messages live in segments, so the message routes (queue-admin-api.md §2)
// read segments, newest first, and decode only those they list; a message's
// status is computed from its partition's cursors and dead letters.

// SegmentFilter narrows the segments a listing reads: the tenant's, of the named
// queue, partition, namespace and task when not nil, overlapping the window
// [From, To).
type SegmentFilter struct {
	Queue, Partition, Namespace, Task *string
	From, To                          time.Time
}

// StoredSegment is a stored segment with the names of its partition and queue.
type StoredSegment struct {
	PartitionID      uuid.UUID
	Queue, Partition string
	Namespace, Task  string
	Priority         int
	Floor            int64 // the partition's floor: nothing below it shows
	Base             int64
	Frames           int
	Body             []byte
	Checksum         int64
	MaxCreatedAt     time.Time
}

// StoredSegmentKey is where a listing stopped, the last segment it read.
type StoredSegmentKey struct {
	MaxCreatedAt time.Time
	PartitionID  uuid.UUID
	Base         int64
}

// Key is the key of segment g.
func (g *StoredSegment) Key() StoredSegmentKey {
	return StoredSegmentKey{MaxCreatedAt: g.MaxCreatedAt, PartitionID: g.PartitionID, Base: g.Base}
}

// StoredSegments returns up to n of the tenant's segments that overlap the window
// and whose newest frame is in the slice [lo, hi), newest (by
// max_created_at) first, after the key when not nil. A frame of a later
// segment is never newer than the segments before it, so a listing stops
// reading once it holds enough frames newer than the next segment. The
// slice goes to log_segments_time_brin, so that a call reads the segments of
// its slice and sorts only those; a queue or a partition goes to
// queues_tenant_name_key and the partitions' and segments' primary keys.
func (d *DB) StoredSegments(ctx context.Context, tenant string, w SegmentFilter, lo, hi time.Time, after *StoredSegmentKey, n int) ([]StoredSegment, error) {
	var k StoredSegmentKey
	if after != nil {
		k = *after
	}
	return collect(ctx, d, `SELECT s.partition_id, q.name, p.name, coalesce(q.namespace, ''), coalesce(q.task, ''),
			q.priority, p.floor_offset, s.base_offset, s.frame_count, s.body, s.checksum, s.max_created_at
		  FROM queen.log_segments s
		  JOIN queen.partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND ($2::text IS NULL OR q.name = $2) AND ($3::text IS NULL OR p.name = $3)
		   AND ($4::text IS NULL OR coalesce(q.namespace, '') = $4) AND ($5::text IS NULL OR coalesce(q.task, '') = $5)
		   AND s.max_created_at >= $6 AND s.max_created_at < $7 AND s.min_created_at < $8
		   AND ($9::boolean OR (s.max_created_at, s.partition_id, s.base_offset) < ($10, $11, $12))
		 ORDER BY s.max_created_at DESC, s.partition_id DESC, s.base_offset DESC
		 LIMIT $13`, "read segments", func(r pgx.CollectableRow) (StoredSegment, error) {
		var g StoredSegment
		err := r.Scan(&g.PartitionID, &g.Queue, &g.Partition, &g.Namespace, &g.Task, &g.Priority,
			&g.Floor, &g.Base, &g.Frames, &g.Body, &g.Checksum, &g.MaxCreatedAt)
		return g, err
	}, tenant, w.Queue, w.Partition, w.Namespace, w.Task, lo, hi, w.To,
		after == nil, k.MaxCreatedAt, k.PartitionID, k.Base, n)
}

// CursorState is what a message's status needs of one cursor.
type CursorState struct {
	Group                string
	Committed            int64
	BatchStart, BatchEnd *int64
	LeaseLive            bool
	LeaseExpiresAt       *time.Time
}

// CursorStates returns the cursors of the partitions by partition: one scan of
// cursors_pkey per partition.
func (d *DB) CursorStates(ctx context.Context, partitions []uuid.UUID) (map[uuid.UUID][]CursorState, error) {
	rows, err := d.q.Query(ctx, `SELECT x.partition_id, x.consumer_group, x.committed, x.batch_start, x.batch_end,
			x.lease_id IS NOT NULL AND queen.lease_live(x.lease_expires_at), x.lease_expires_at
		  FROM queen.cursors x WHERE x.partition_id = ANY($1) ORDER BY x.partition_id, x.consumer_group`, ids.IDs(partitions))
	if err != nil {
		return nil, fmt.Errorf("read cursors: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID][]CursorState{}
	for rows.Next() {
		var pid uuid.UUID
		var c CursorState
		if err := rows.Scan(&pid, &c.Group, &c.Committed, &c.BatchStart, &c.BatchEnd, &c.LeaseLive, &c.LeaseExpiresAt); err != nil {
			return nil, fmt.Errorf("read cursors: %w", err)
		}
		out[pid] = append(out[pid], c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read cursors: %w", err)
	}
	return out, nil
}

// DeadLetterEntry is a message's dead-letter entry (the latest, when several
// groups dead-lettered it).
type DeadLetterEntry struct {
	ErrorMessage *string
	RetryCount   int
}

// DeadLettered returns the dead-letter entries of the messages, by message
// id: a probe of dead_letters_pkey's partition prefix per partition.
func (d *DB) DeadLettered(ctx context.Context, partitions, messages []uuid.UUID) (map[uuid.UUID]DeadLetterEntry, error) {
	rows, err := d.q.Query(ctx, `SELECT DISTINCT ON (d.message_id) d.message_id, d.error_message, d.retry_count
		  FROM queen.dead_letters d WHERE d.partition_id = ANY($1) AND d.message_id = ANY($2)
		 ORDER BY d.message_id, d.failed_at DESC`, ids.IDs(partitions), ids.IDs(messages))
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]DeadLetterEntry{}
	for rows.Next() {
		var id uuid.UUID
		var e DeadLetterEntry
		if err := rows.Scan(&id, &e.ErrorMessage, &e.RetryCount); err != nil {
			return nil, fmt.Errorf("read dead letters: %w", err)
		}
		out[id] = e
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	return out, nil
}

// ConsumptionModes are the queue-mode cursor and the named groups over the tenant's
// partitions (of one queue when queue is not nil): one scan of their
// cursors.
func (d *DB) ConsumptionModes(ctx context.Context, tenant string, queue *string) (hasQueueMode bool, groups int, err error) {
	err = d.q.QueryRow(ctx, `SELECT coalesce(bool_or(x.consumer_group = $3), false),
			count(DISTINCT x.consumer_group) FILTER (WHERE x.consumer_group <> $3)::int
		  FROM queen.cursors x
		  JOIN queen.partitions p ON p.id = x.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND ($2::text IS NULL OR q.name = $2)`, tenant, queue, catalog.QueueMode).Scan(&hasQueueMode, &groups)
	if err != nil {
		return false, 0, fmt.Errorf("read consumption modes: %w", err)
	}
	return hasQueueMode, groups, nil
}

// FoundMessage is a message's segment, with its queue's settings.
type FoundMessage struct {
	StoredSegment
	Encrypted                              bool
	LeaseTime, RetryLimit, RetryDelay, TTL int
	// Index is the message's frame in the segment.
	Index int
}

// FindMessage returns the newest message of the tenant's partition with the
// transaction id, or nil (also when it lies below the partition's floor). Segments keep their frames' transaction ids beside
// the compressed body, so this reads the partition's segments backwards on
// log_segments_pkey, without decoding, and stops at the first that holds
// it: a recent message costs a probe or two, an old one a scan of that one
// partition's segment rows (never of its bodies, nor of another partition).
func (d *DB) FindMessage(ctx context.Context, tenant string, partition uuid.UUID, txid string) (*FoundMessage, error) {
	var f FoundMessage
	err := d.q.QueryRow(ctx, `SELECT s.partition_id, q.name, p.name, coalesce(q.namespace, ''), coalesce(q.task, ''),
			q.priority, p.floor_offset, s.base_offset, s.frame_count, s.body, s.checksum, s.max_created_at,
			q.encryption_enabled, q.lease_time, q.retry_limit, q.retry_delay, q.ttl,
			(SELECT max(t.n) FROM unnest(s.txids) WITH ORDINALITY AS t (txid, n) WHERE t.txid = $3)::int - 1
		  FROM queen.partitions p
		  JOIN queen.queues q ON q.id = p.queue_id AND q.tenant = $1
		  JOIN LATERAL (SELECT * FROM queen.log_segments s WHERE s.partition_id = p.id AND $3 = ANY(s.txids)
		                 ORDER BY s.base_offset DESC LIMIT 1) s ON true
		 WHERE p.id = $2`, tenant, partition, txid).Scan(&f.PartitionID, &f.Queue, &f.Partition, &f.Namespace,
		&f.Task, &f.Priority, &f.Floor, &f.Base, &f.Frames, &f.Body, &f.Checksum, &f.MaxCreatedAt,
		&f.Encrypted, &f.LeaseTime, &f.RetryLimit, &f.RetryDelay, &f.TTL, &f.Index)
	if err == pgx.ErrNoRows || err == nil && f.Base+int64(f.Index) < f.Floor {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find message %q: %w", txid, err)
	}
	return &f, nil
}

// SegmentRewrite is a segment whose body a deletion re-encoded.
type SegmentRewrite struct {
	Body      []byte
	Checksum  int64
	MessageID uuid.UUID
}

// DeleteMessage replaces the segment that FindMessage found with its
// rewrite, in which the message's frame is emptied and marked deleted, and
// clears its transaction id from the segment's list, removes its dead
// letters and traces and frees the id for a later push (queen.push_dedup). One
// statement, on condition that the segment is still as it was read: false
// when a concurrent deletion or retention changed it first.
func (d *DB) DeleteMessage(ctx context.Context, f *FoundMessage, txid string, r SegmentRewrite) (bool, error) {
	var done bool
	err := d.q.QueryRow(ctx, `WITH seg AS (
			UPDATE queen.log_segments s
			   SET body = $4, checksum = $5, txids[$6 + 1] = ''
			 WHERE s.partition_id = $1 AND s.base_offset = $2 AND s.checksum = $3 AND s.txids[$6 + 1] = $7
			RETURNING 1),
		dl AS (DELETE FROM queen.dead_letters d
		        WHERE d.partition_id = $1 AND d.message_id = $8 AND EXISTS (SELECT FROM seg)),
		dd AS (DELETE FROM queen.push_dedup x
		        WHERE x.partition_id = $1 AND x.transaction_id = $7 AND x.message_id = $8 AND EXISTS (SELECT FROM seg)),
		tr AS (DELETE FROM queen.traces t
		        WHERE t.partition_id = $1 AND t.transaction_id = $7 AND EXISTS (SELECT FROM seg))
		SELECT EXISTS (SELECT FROM seg)`, f.PartitionID, f.Base, f.Checksum, r.Body, r.Checksum, f.Index, txid, r.MessageID).Scan(&done)
	if err != nil {
		return false, fmt.Errorf("delete message %q: %w", txid, err)
	}
	return done, nil
}
