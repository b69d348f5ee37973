package dbtest

import (
	"context"
	"fmt"
	"time"

	"github.com/regent-mq/regent/broker/domain/segment"
)

// encoded is segments as log_segments stores them, in unnest's arrays.
type encoded struct {
	bodies      [][]byte
	sums        []int64
	counts      []int
	txids       [][]string
	first, last []time.Time
	bases       []int64 // each segment's offset, from 0 for the first
	total       int64
}

func encode(segs [][]segment.Frame) (encoded, error) {
	var e encoded
	for _, frames := range segs {
		if len(frames) == 0 {
			return encoded{}, fmt.Errorf("a segment of no frames")
		}
		body, sum := segment.Encode(nil, frames)
		ids := make([]string, len(frames))
		lo, hi := frames[0].CreatedAt, frames[0].CreatedAt
		for i, f := range frames {
			ids[i] = f.TransactionID
			lo, hi = min(lo, f.CreatedAt), max(hi, f.CreatedAt)
		}
		e.bodies, e.sums, e.counts = append(e.bodies, body), append(e.sums, int64(sum)), append(e.counts, len(frames))
		e.txids = append(e.txids, ids)
		e.first, e.last = append(e.first, time.UnixMicro(lo)), append(e.last, time.UnixMicro(hi))
		e.bases = append(e.bases, e.total)
		e.total += int64(len(frames))
	}
	return e, nil
}

// AppendSegments stores segments of frames, one after the other, at a
// partition of a tenant's queue's next offset, and moves the offset past
// them: as pushes at the frames' times would have left them, in one round
// trip however many.
func (d *DB) AppendSegments(ctx context.Context, tenant, queue, partition string, segs ...[]segment.Frame) error {
	e, err := encode(segs)
	if err != nil {
		return fmt.Errorf("append segments to %q/%s: %w", queue, partition, err)
	}
	tag, err := d.pool.Exec(ctx, `WITH p AS (UPDATE queen.partitions p SET next_offset = p.next_offset + $4
		  FROM queen.queues q WHERE q.id = p.queue_id AND q.tenant = $1 AND q.name = $2 AND p.name = $3
		  RETURNING p.id, p.next_offset - $4 AS base)
		INSERT INTO queen.log_segments (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
		SELECT p.id, p.base + s.rel, s.n, s.body, s.sum, ARRAY(SELECT jsonb_array_elements_text($11::jsonb -> (s.i::int - 1))), s.lo, s.hi
		  FROM p, unnest($5::bigint[], $6::int[], $7::bytea[], $8::bigint[], $9::timestamptz[], $10::timestamptz[])
		       WITH ORDINALITY AS s (rel, n, body, sum, lo, hi, i)`,
		tenant, queue, partition, e.total, e.bases, e.counts, e.bodies, e.sums, e.first, e.last, e.txids)
	if err != nil {
		return fmt.Errorf("append segments to %q/%s: %w", queue, partition, err)
	}
	if tag.RowsAffected() != int64(len(segs)) {
		return fmt.Errorf("append segments to %q/%s: no such partition", queue, partition)
	}
	return nil
}

// Spread adds one partition per frame to a tenant's queue, which must
// exist, named p-1 to p-n, each holding its frame as its one segment: a
// queue as wide as a long-lived one, in one round trip.
func (d *DB) Spread(ctx context.Context, tenant, queue string, frames []segment.Frame) error {
	segs := make([][]segment.Frame, len(frames))
	for i := range frames {
		segs[i] = frames[i : i+1]
	}
	e, err := encode(segs)
	if err != nil {
		return fmt.Errorf("spread %q: %w", queue, err)
	}
	tag, err := d.pool.Exec(ctx, `WITH q AS (SELECT id FROM queen.queues WHERE tenant = $1 AND name = $2),
		s AS (SELECT * FROM unnest($3::bytea[], $4::bigint[], $5::timestamptz[]) WITH ORDINALITY AS s (body, sum, at, i)),
		p AS (INSERT INTO queen.partitions (id, queue_id, name, next_offset)
		      SELECT gen_random_uuid(), q.id, 'p-' || s.i, 1 FROM q, s RETURNING id, name)
		INSERT INTO queen.log_segments (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
		SELECT p.id, 0, 1, s.body, s.sum, ARRAY[($6::text[])[s.i]], s.at, s.at FROM p JOIN s ON p.name = 'p-' || s.i`,
		tenant, queue, e.bodies, e.sums, e.first, transactionIDs(frames))
	if err != nil {
		return fmt.Errorf("spread %q over %d partitions: %w", queue, len(frames), err)
	}
	if tag.RowsAffected() != int64(len(frames)) {
		return fmt.Errorf("spread %q: no such queue", queue)
	}
	return nil
}

func transactionIDs(frames []segment.Frame) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = f.TransactionID
	}
	return out
}

// PlaceCursors puts group's cursor on every partition of a tenant's queue
// at committed, as a consumer that had acknowledged that far in each
// would leave it. (EXCLUDED's time: Citus refuses now() in an upsert's
// SET.)
func (d *DB) PlaceCursors(ctx context.Context, tenant, queue, group string, committed int64) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed, total_consumed, last_consumed_at)
		SELECT p.id, $3, $4, $4, now() FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND q.name = $2
		ON CONFLICT (partition_id, consumer_group)
		DO UPDATE SET committed = $4, total_consumed = $4, last_consumed_at = EXCLUDED.last_consumed_at`,
		tenant, queue, group, committed)
	if err != nil {
		return fmt.Errorf("place the cursors of %s on %q: %w", group, queue, err)
	}
	return nil
}

// Analyze refreshes the planner's statistics, as autovacuum would after a
// large arrangement, so that a benchmark reads it as a long-lived database.
func (d *DB) Analyze(ctx context.Context) error {
	if _, err := d.pool.Exec(ctx, `ANALYZE`); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}
