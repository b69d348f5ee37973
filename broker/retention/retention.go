// Package retention removes what the queue no longer needs: whole log
// segments past a queue's retentionSeconds, segments every consumer group has
// consumed when the queue has retentionEnabled (after
// completedRetentionSeconds), and push dedup rows older than the dedup
// window. Offsets then have gaps; pops and acks walk over them.
//
// Every replica runs a Sweeper, and a PostgreSQL advisory lock lets one sweep
// at a time: the others skip their turn.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lockKey is the advisory lock of the sweep ("retain" in ASCII).
const lockKey int64 = 0x72657461696e

// chunk bounds the rows one statement deletes, so that a large backlog is
// removed in short transactions.
const chunk = 5000

// Sweeper sweeps periodically. It is safe for concurrent use.
type Sweeper struct {
	pool        *pgxpool.Pool
	log         *slog.Logger
	dedupWindow time.Duration
}

// Stats is what one sweep removed.
type Stats struct {
	Aged, Consumed, Dedup int64
	Skipped               bool // another replica held the lock
}

// New returns a Sweeper.
func New(pool *pgxpool.Pool, log *slog.Logger, dedupWindow time.Duration) *Sweeper {
	return &Sweeper{pool: pool, log: log, dedupWindow: dedupWindow}
}

// Run sweeps every interval until ctx ends.
func (s *Sweeper) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st, err := s.Sweep(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				s.log.Warn("retention sweep failed", "err", err)
			case st.Aged+st.Consumed+st.Dedup > 0:
				s.log.Debug("retention sweep", "aged_segments", st.Aged, "consumed_segments", st.Consumed, "dedup_rows", st.Dedup)
			}
		}
	}
}

// Sweep runs one sweep now, unless another replica is sweeping.
func (s *Sweeper) Sweep(ctx context.Context) (Stats, error) {
	var st Stats
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return st, fmt.Errorf("retention: acquire connection: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lockKey).Scan(&locked); err != nil {
		return st, fmt.Errorf("retention: take lock: %w", err)
	}
	if !locked {
		st.Skipped = true
		return st, nil
	}
	defer func() {
		// A session lock outlives a cancelled context on a pooled
		// connection unless released with a fresh one.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockKey)
	}()

	rows, err := conn.Query(ctx, `SELECT id, retention_seconds, retention_enabled, completed_retention_seconds
		FROM queen.queues WHERE retention_seconds > 0 OR retention_enabled`)
	if err != nil {
		return st, fmt.Errorf("retention: list queues: %w", err)
	}
	type policy struct {
		id            uuid.UUID
		maxAge        int
		consumed      bool
		consumedAfter int
	}
	queues, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (policy, error) {
		var p policy
		return p, r.Scan(&p.id, &p.maxAge, &p.consumed, &p.consumedAfter)
	})
	if err != nil {
		return st, fmt.Errorf("retention: list queues: %w", err)
	}
	for _, q := range queues {
		if q.maxAge > 0 {
			n, err := trim(ctx, conn, `DELETE FROM queen.log_segments WHERE ctid IN (
				SELECT s.ctid FROM queen.log_segments s JOIN queen.partitions p ON p.id = s.partition_id
				 WHERE p.queue_id = $1 AND s.max_created_at < now() - make_interval(secs => $2) LIMIT $3)
				RETURNING partition_id, octet_length(body)`,
				q.id, q.maxAge)
			st.Aged += n
			if err != nil {
				return st, fmt.Errorf("retention: aged segments of queue %s: %w", q.id, err)
			}
		}
		if q.consumed {
			// A group subscribed to the queue that has no cursor on a
			// partition yet may still start at its beginning: keep it.
			n, err := trim(ctx, conn, `WITH low AS (
					SELECT p.id, min(c.committed) AS committed
					  FROM queen.partitions p JOIN queen.cursors c ON c.partition_id = p.id
					 WHERE p.queue_id = $1
					   AND NOT EXISTS (SELECT 1 FROM queen.subscriptions sub
					                    WHERE sub.queue_id = p.queue_id AND NOT EXISTS (
					                          SELECT 1 FROM queen.cursors c2
					                           WHERE c2.partition_id = p.id AND c2.consumer_group = sub.consumer_group))
					 GROUP BY p.id)
				DELETE FROM queen.log_segments WHERE ctid IN (
					SELECT s.ctid FROM queen.log_segments s JOIN low ON low.id = s.partition_id
					 WHERE s.base_offset + s.frame_count <= low.committed
					   AND s.max_created_at < now() - make_interval(secs => $2) LIMIT $3)
				RETURNING partition_id, octet_length(body)`,
				q.id, q.consumedAfter)
			st.Consumed += n
			if err != nil {
				return st, fmt.Errorf("retention: consumed segments of queue %s: %w", q.id, err)
			}
		}
	}
	// The BRIN index finds the expired rows by block range, but a range no
	// vacuum has summarized yet matches every search, so each sweep would
	// read every row pushed since the last vacuum: on a table growing by
	// thousands of rows a second, a part of the window that grows with it.
	// Summarizing first reads those blocks once, and the sweep then reads
	// only the ranges that hold expired rows.
	if _, err := conn.Exec(ctx, `SELECT brin_summarize_new_values('queen.push_dedup_created_brin')`); err != nil {
		return st, fmt.Errorf("retention: summarize dedup rows: %w", err)
	}
	n, err := drain(ctx, conn, `DELETE FROM queen.push_dedup WHERE ctid IN (
		SELECT ctid FROM queen.push_dedup WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)`,
		s.dedupWindow.Seconds())
	st.Dedup = n
	if err != nil {
		return st, fmt.Errorf("retention: dedup rows: %w", err)
	}
	return st, nil
}

// trim runs a chunked DELETE of log segments that returns the partition and
// body size of each (its last parameter is the chunk size) until it deletes
// less than a chunk, and returns how many segments went. Each chunk takes
// its bytes off the partitions' stored_bytes (the counter the tenant
// quota's maxStoredBytes is checked against) in the same transaction,
// locking the partitions in id order as pushes do, so that the two never
// deadlock.
func trim(ctx context.Context, conn *pgxpool.Conn, sql string, args ...any) (int64, error) {
	var total int64
	args = append(args, chunk)
	for {
		var n int64
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, sql, args...)
			if err != nil {
				return err
			}
			freed := map[uuid.UUID]int64{}
			var pid uuid.UUID
			var size int64
			if _, err := pgx.ForEachRow(rows, []any{&pid, &size}, func() error {
				freed[pid] += size
				n++
				return nil
			}); err != nil {
				return err
			}
			if n == 0 {
				return nil
			}
			ids := make([]uuid.UUID, 0, len(freed))
			sizes := make([]int64, 0, len(freed))
			for id, b := range freed {
				ids, sizes = append(ids, id), append(sizes, b)
			}
			if _, err := tx.Exec(ctx, `SELECT FROM queen.partitions p WHERE p.id = ANY ($1) ORDER BY p.id FOR UPDATE`, ids); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE queen.partitions p SET stored_bytes = p.stored_bytes - f.bytes
				  FROM unnest($1::uuid[], $2::bigint[]) AS f (id, bytes) WHERE p.id = f.id`, ids, sizes)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < chunk {
			return total, nil
		}
	}
}

// drain runs a chunked DELETE (its last parameter is the chunk size) until
// it deletes less than a chunk, and returns how many rows went.
func drain(ctx context.Context, conn *pgxpool.Conn, sql string, args ...any) (int64, error) {
	var total int64
	args = append(args, chunk)
	for {
		tag, err := conn.Exec(ctx, sql, args...)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < chunk {
			return total, nil
		}
	}
}
