package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/broker/domain/ids"
	"github.com/regent-mq/regent/broker/tracing"
)

// PopCall is one call of queen.pop_v2.
type PopCall struct {
	Tenant     string
	Queue      string // the queue's name, for errors
	QueueID    uuid.UUID
	Group      string
	Partitions int // how many to claim at most
	Batch      int
	LeaseID    uuid.UUID // uuid.Nil: auto-ack
	SubStart   string    // 'all', 'now' or an RFC 3339 time
	MaxBytes   int64     // the cap on the stored bytes of the answer
}

// PopClaim is one partition a pop claimed, with the segments of its batch.
type PopClaim struct {
	ID         uuid.UUID
	Name       string
	BatchStart int64
	BatchEnd   int64
	Segments   []PopSegment
}

// PopSegment is a stored segment that a claimed batch reads.
type PopSegment struct {
	Base     int64
	Count    int
	Body     []byte
	Checksum int64
}

// PopLook is the outcome of a candidate queen.pop_v2 looked at.
type PopLook struct {
	Outcome hotlist.Outcome
	RetryAt time.Time
}

// Pop calls queen.pop_v2 on the candidate partitions, in order, one round
// trip: the claimed partitions with their segments, the outcome of each
// candidate it looked at, in order, and gone when the queue no longer
// exists. The candidates are not a field of c: its strings go into the
// call's arguments, so its content escapes, and the caller's slice of
// candidates would be allocated on the heap with it.
func (d *DB) Pop(ctx context.Context, c *PopCall, candidates []uuid.UUID) (claims []PopClaim, looks []PopLook, gone bool, err error) {
	ctx, span := tracing.StartDB(ctx, "pop")
	claims, looks, gone, err = d.pop(ctx, c, candidates)
	tracing.End(span, err)
	return claims, looks, gone, err
}

// popSQL names the first candidate first: on Citus the call goes whole to
// the worker that holds it (queen.pop_v2).
const popSQL = `SELECT partition_id, partition_name, outcome, retry_at, batch_start, batch_end,
		base_offset, frame_count, body, checksum
	FROM queen.pop_v2(p_shard => $1, p_tenant => $2, p_queue_id => $3, p_candidates => $4, p_group => $5,
		p_partitions => $6, p_batch => $7, p_lease_id => $8, p_sub_start => $9, p_max_bytes => $10)`

func (d *DB) pop(ctx context.Context, c *PopCall, candidates []uuid.UUID) (claims []PopClaim, looks []PopLook, gone bool, err error) {
	key := shard(candidates)
	rows, err := d.on(key).Query(ctx, popSQL, key, c.Tenant, ids.ID(c.QueueID), ids.IDs(candidates), c.Group, c.Partitions,
		c.Batch, pgtype.UUID{Bytes: c.LeaseID, Valid: c.LeaseID != uuid.Nil}, c.SubStart, c.MaxBytes)
	if err != nil {
		return nil, nil, false, fmt.Errorf("pop %q: %w", c.Queue, err)
	}
	defer rows.Close()
	var got popRows
	for rows.Next() {
		var r popRow
		if err := rows.Scan(&r.pid, &r.name, &r.outcome, &r.retryAt, &r.start, &r.end, &r.base, &r.count, &r.body, &r.sum); err != nil {
			return nil, nil, false, fmt.Errorf("pop %q: %w", c.Queue, err)
		}
		got.add(&r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, got.gone, fmt.Errorf("pop %q: %w", c.Queue, err)
	}
	return got.claims, got.looks, got.gone, nil
}

// popRow is a row of queen.pop_v2.
type popRow struct {
	pid                   uuid.UUID
	name                  pgtype.Text
	outcome               string
	retryAt               pgtype.Timestamptz
	start, end, base, sum pgtype.Int8
	count                 pgtype.Int4
	body                  []byte
}

// popRows gathers queen.pop_v2's rows, as a pop's call or a cycle's next
// batch (queen_streams.cycle_next_v2) reads them.
type popRows struct {
	claims []PopClaim
	looks  []PopLook
	segs   []PopSegment
	gone   bool
}

func (p *popRows) add(r *popRow) {
	switch r.outcome {
	case "segment":
		p.segs = append(p.segs, PopSegment{Base: r.base.Int64, Count: int(r.count.Int32), Body: r.body, Checksum: r.sum.Int64})
	case "claimed":
		p.claims = append(p.claims, PopClaim{ID: r.pid, Name: r.name.String, BatchStart: r.start.Int64, BatchEnd: r.end.Int64, Segments: p.segs})
		p.segs = nil
		p.looks = append(p.looks, PopLook{hotlist.Claimed, r.retryAt.Time})
	case "busy":
		// A claim that failed after its segments were read voids them.
		p.segs = nil
		p.looks = append(p.looks, PopLook{hotlist.Busy, r.retryAt.Time})
	case "empty":
		p.looks = append(p.looks, PopLook{hotlist.Empty, time.Time{}})
	case "gone":
		p.gone = true
	}
}

// HotPartitions returns the partitions of queueID whose log reaches past
// group's cursor, or that the group has never read: what the hot list is
// seeded with.
func (d *DB) HotPartitions(ctx context.Context, queueID uuid.UUID, group string) ([]uuid.UUID, error) {
	rows, err := d.q.Query(ctx, `SELECT p.id FROM queen.partitions p
		LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = $2
		WHERE p.queue_id = $1 AND p.next_offset > 0 AND p.next_offset > COALESCE(c.committed, 0)`, queueID, group)
	if err != nil {
		return nil, fmt.Errorf("seed hot list: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("seed hot list: %w", err)
	}
	return ids, nil
}

// Released is a partition whose lease a release ended.
type Released struct{ Queue, Partition uuid.UUID }

// ReleaseLease ends the lease leaseID wherever it is held
// (queen.lease_release_v2): a pop whose answer nobody will read. The cursors
// stay, and so do their retry counts.
func (d *DB) ReleaseLease(ctx context.Context, leaseID uuid.UUID) ([]Released, error) {
	rows, _ := d.q.Query(ctx, `UPDATE queen.cursors c
		   SET (lease_id, lease_expires_at) = (SELECT r.lease_id, r.lease_expires_at
		                                         FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, true, false) r)
		  FROM queen.partitions p
		 WHERE c.lease_id = $1 AND p.id = c.partition_id
		RETURNING p.queue_id, p.id`, leaseID)
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Released])
}

// EndBatches ends each batch of group leased by leaseID on partitions[i] at
// ends[i], where its delivered messages end, since the frames after them
// were deleted; a batch that delivered none (ends[i] at its start) is
// consumed whole and its lease released (queen.lease_release_v2), keeping the
// retry count as the broker always has. It returns the partitions whose
// lease it released.
func (d *DB) EndBatches(ctx context.Context, group string, leaseID uuid.UUID, partitions []uuid.UUID, ends []int64) ([]uuid.UUID, error) {
	rows, err := d.q.Query(ctx, `UPDATE queen.cursors c
		   SET batch_end = CASE WHEN t.e > c.batch_start THEN t.e ELSE c.batch_end END,
		       committed = CASE WHEN t.e > c.batch_start THEN c.committed ELSE c.batch_end END,
		       (lease_id, lease_expires_at) = (SELECT r.lease_id, r.lease_expires_at
		                                         FROM queen.lease_release_v2(c.lease_id, c.lease_expires_at, c.retry_count, t.e > c.batch_start IS NOT TRUE, false) r)
		  FROM unnest($2::uuid[], $3::bigint[]) AS t (pid, e)
		 WHERE c.partition_id = t.pid AND c.consumer_group = $1 AND c.lease_id = $4
		RETURNING c.partition_id, c.lease_id IS NULL`, group, ids.IDs(partitions), ends, leaseID)
	if err != nil {
		return nil, err
	}
	var released []uuid.UUID
	for rows.Next() {
		var pid uuid.UUID
		var gone bool
		if err := rows.Scan(&pid, &gone); err != nil {
			rows.Close()
			return nil, err
		}
		if gone {
			released = append(released, pid)
		}
	}
	return released, rows.Err()
}
