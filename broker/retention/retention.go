// Package retention removes what the queue no longer keeps, as Queen's
// cleanup does (queue-admin-api.md §8):
//
//   - retention, for queues with retentionEnabled (the master switch):
//     messages older than retentionSeconds, consumed or not, and messages
//     older than completedRetentionSeconds that every cursor on their
//     partition has consumed;
//   - eviction, for queues with maxWaitTimeSeconds, whatever
//     retentionEnabled says: messages older than that, for every group,
//     without a dead letter, leased ones included;
//   - always: push dedup rows older than the dedup window, and partitions
//     that hold no messages and saw no push or cursor activity for the
//     cleanup age, with their cursors; traces of messages that are gone,
//     and traces, analytics minutes, replica samples and retention events
//     older than --metrics-retention.
//
// The log is made of immutable segments, so a rule raises its partition's
// floor (queen.raise_floors): offsets below it are gone for pops, acks and
// lookups, and the segments wholly below it are dropped in chunks. Offsets
// then have gaps; pops and acks walk over them. A floor is a prefix, so
// eviction, which Queen applies from the lowest cursor on, also takes what
// every cursor had consumed below that: no cursor notices, but a group that
// subscribes afterwards does not get those messages, where Queen would keep
// them until retention.
//
// Every replica runs a Sweeper; retention and eviction share one
// PostgreSQL advisory lock, so one sweep of either runs at a time across the
// cluster and the others skip their turn.
package retention

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/counters"
)

// lockKey is the advisory lock of both sweeps ("retain" in ASCII).
const lockKey int64 = 0x72657461696e

// cleanupCap bounds the idle partitions one sweep deletes, as Queen's does.
const cleanupCap = 1000

// Settings are the sweeps' knobs (queue-admin-api.md §8 gives Queen's
// defaults).
type Settings struct {
	DedupWindow    time.Duration // how long a client transactionId is remembered
	RetentionChunk int           // rows one retention statement deletes (RETENTION_BATCH_SIZE)
	EvictionChunk  int           // rows one eviction statement deletes (EVICTION_BATCH_SIZE)
	CleanupAfter   time.Duration // idle age of an empty partition that goes (PARTITION_CLEANUP_DAYS)
	MetricsAge     time.Duration // how long traces, analytics minutes and samples are kept (--metrics-retention); 0 keeps them
}

// Sweeper sweeps periodically. It is safe for concurrent use.
type Sweeper struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	set      Settings
	announce func(queue, partition uuid.UUID)
}

// Stats is what one sweep removed. Aged, Consumed and Evicted count
// offsets (messages) that went below a floor; Segments the rows dropped.
type Stats struct {
	Aged, Consumed, Evicted int64
	Segments                int64
	Dedup                   int64
	Partitions              int64 // idle empty partitions deleted
	Traces                  int64 // traces of messages gone, or past MetricsAge
	Skipped                 bool  // another replica held the lock
}

// New returns a Sweeper. announce tells the hot lists that a partition
// whose lease a sweep ended may have messages to deliver (broker/log's
// Announce).
func New(pool *pgxpool.Pool, log *slog.Logger, set Settings, announce func(queue, partition uuid.UUID)) *Sweeper {
	return &Sweeper{pool: pool, log: log, set: set, announce: announce}
}

// Run runs retention every retain and eviction every evict until ctx ends.
func (s *Sweeper) Run(ctx context.Context, retain, evict time.Duration) {
	rt := time.NewTicker(retain)
	defer rt.Stop()
	et := time.NewTicker(evict)
	defer et.Stop()
	for {
		var st Stats
		var err error
		select {
		case <-ctx.Done():
			return
		case <-rt.C:
			st, err = s.Sweep(ctx)
		case <-et.C:
			st, err = s.Evict(ctx)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("retention sweep failed", "err", err)
		case st.Evicted > 0:
			// Recorded: an evicted message was never delivered.
			s.log.Info("eviction sweep", "evicted_messages", st.Evicted, "segments", st.Segments)
		case st.Aged+st.Consumed+st.Dedup+st.Partitions > 0:
			s.log.Debug("retention sweep", "aged_messages", st.Aged, "consumed_messages", st.Consumed,
				"segments", st.Segments, "dedup_rows", st.Dedup, "idle_partitions", st.Partitions)
		}
	}
}

// policy is a queue's age limit for one rule.
type policy struct {
	id      uuid.UUID
	seconds int
}

// Sweep runs one retention sweep now, unless another replica is sweeping.
func (s *Sweeper) Sweep(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.locked(ctx, &st, func(conn *pgxpool.Conn) error {
		aged, err := policies(ctx, conn, `SELECT id, retention_seconds FROM queen.queues
			WHERE retention_enabled AND retention_seconds > 0`)
		if err != nil {
			return err
		}
		for _, q := range aged {
			if err := s.floors(ctx, conn, q, "retention", false, s.set.RetentionChunk, &st.Aged, &st.Segments); err != nil {
				return fmt.Errorf("retention: retentionSeconds of queue %s: %w", q.id, err)
			}
		}
		consumed, err := policies(ctx, conn, `SELECT id, completed_retention_seconds FROM queen.queues
			WHERE retention_enabled AND completed_retention_seconds > 0`)
		if err != nil {
			return err
		}
		for _, q := range consumed {
			if err := s.floors(ctx, conn, q, "completed_retention", true, s.set.RetentionChunk, &st.Consumed, &st.Segments); err != nil {
				return fmt.Errorf("retention: completedRetentionSeconds of queue %s: %w", q.id, err)
			}
		}
		if err := s.dedup(ctx, conn, &st); err != nil {
			return err
		}
		if err := s.traces(ctx, conn, &st); err != nil {
			return err
		}
		if s.set.MetricsAge > 0 {
			if err := counters.Sweep(ctx, conn, s.set.MetricsAge); err != nil {
				return fmt.Errorf("retention: analytics: %w", err)
			}
		}
		return s.idlePartitions(ctx, conn, &st)
	})
	return st, err
}

// Evict runs one eviction sweep now, unless another replica is sweeping.
func (s *Sweeper) Evict(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.locked(ctx, &st, func(conn *pgxpool.Conn) error {
		queues, err := policies(ctx, conn, `SELECT id, max_wait_time_seconds FROM queen.queues
			WHERE max_wait_time_seconds > 0`)
		if err != nil {
			return err
		}
		for _, q := range queues {
			if err := s.floors(ctx, conn, q, "eviction", false, s.set.EvictionChunk, &st.Evicted, &st.Segments); err != nil {
				return fmt.Errorf("eviction: maxWaitTimeSeconds of queue %s: %w", q.id, err)
			}
		}
		return nil
	})
	return st, err
}

// locked runs sweep on a connection holding the sweeps' lock, or marks st
// skipped when another replica holds it. It first summarizes the block
// ranges of the log's time index added since, which queen.raise_floors
// needs (see the dedup sweep's comment for why).
func (s *Sweeper) locked(ctx context.Context, st *Stats, sweep func(*pgxpool.Conn) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("retention: acquire connection: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lockKey).Scan(&locked); err != nil {
		return fmt.Errorf("retention: take lock: %w", err)
	}
	if !locked {
		st.Skipped = true
		return nil
	}
	defer func() {
		// A session lock outlives a cancelled context on a pooled
		// connection unless released with a fresh one.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockKey)
	}()
	if _, err := conn.Exec(ctx, `SELECT brin_summarize_new_values('queen.log_segments_time_brin')`); err != nil {
		return fmt.Errorf("retention: summarize the log's time index: %w", err)
	}
	return sweep(conn)
}

func policies(ctx context.Context, conn *pgxpool.Conn, sql string) ([]policy, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("retention: list queues: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (policy, error) {
		var p policy
		return p, r.Scan(&p.id, &p.seconds)
	})
	if err != nil {
		return nil, fmt.Errorf("retention: list queues: %w", err)
	}
	return out, nil
}

// floors raises the floors of q's partitions for its limit and drops the
// segments wholly below them in chunks, adding the offsets that went to
// offsets and the segments dropped to segments.
func (s *Sweeper) floors(ctx context.Context, conn *pgxpool.Conn, q policy, kind string, consumed bool, chunk int, offsets, segments *int64) error {
	rows, err := conn.Query(ctx, `SELECT partition_id, removed, released
		FROM queen.raise_floors(p_queue_id => $1, p_seconds => $2, p_consumed => $3)`, q.id, q.seconds, consumed)
	if err != nil {
		return fmt.Errorf("raise floors: %w", err)
	}
	var released, raised []uuid.UUID
	var removed []int64
	var pid uuid.UUID
	var n int64
	var ended bool
	_, err = pgx.ForEachRow(rows, []any{&pid, &n, &ended}, func() error {
		*offsets += n
		if n > 0 {
			raised, removed = append(raised, pid), append(removed, n)
		}
		if ended {
			released = append(released, pid)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("raise floors: %w", err)
	}
	// What went, per partition, for the analytics (queue-admin-api.md §5).
	if len(raised) > 0 {
		if _, err := conn.Exec(ctx, `INSERT INTO queen.retention_events (tenant, queue, partition_id, kind, messages)
			SELECT q.tenant, q.name, u.pid, $3, u.n
			  FROM unnest($1::uuid[], $2::bigint[]) AS u (pid, n)
			  JOIN queen.partitions p ON p.id = u.pid JOIN queen.queues q ON q.id = p.queue_id`,
			raised, removed, kind); err != nil {
			return fmt.Errorf("record the %s of queue %s: %w", kind, q.id, err)
		}
	}
	// Once committed: the call ran in a transaction of its own.
	for _, p := range released {
		s.announce(q.id, p)
	}
	// Also after no floor rose: a sweep cut short may have left segments.
	// Per partition, so that each probe is a range of the primary key.
	dropped, err := trim(ctx, conn, chunk, `DELETE FROM queen.log_segments WHERE ctid IN (
		SELECT s.ctid FROM queen.partitions p
		 CROSS JOIN LATERAL (SELECT x.ctid FROM queen.log_segments x
		                      WHERE x.partition_id = p.id AND x.base_offset < p.floor_offset
		                        AND x.base_offset + x.frame_count <= p.floor_offset) s
		 WHERE p.queue_id = $1 AND p.floor_offset > 0
		 LIMIT $2)
		RETURNING partition_id, octet_length(body)`, q.id)
	*segments += dropped
	if err != nil {
		return fmt.Errorf("drop segments below the floors: %w", err)
	}
	return nil
}

func (s *Sweeper) dedup(ctx context.Context, conn *pgxpool.Conn, st *Stats) error {
	// The BRIN index finds the expired rows by block range, but a range no
	// vacuum has summarized yet matches every search, so each sweep would
	// read every row pushed since the last vacuum: on a table growing by
	// thousands of rows a second, a part of the window that grows with it.
	// Summarizing first reads those blocks once, and the sweep then reads
	// only the ranges that hold expired rows.
	if _, err := conn.Exec(ctx, `SELECT brin_summarize_new_values('queen.push_dedup_created_brin')`); err != nil {
		return fmt.Errorf("retention: summarize dedup rows: %w", err)
	}
	n, err := drain(ctx, conn, s.set.RetentionChunk, `DELETE FROM queen.push_dedup WHERE ctid IN (
		SELECT ctid FROM queen.push_dedup WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)`,
		s.set.DedupWindow.Seconds())
	st.Dedup = n
	if err != nil {
		return fmt.Errorf("retention: dedup rows: %w", err)
	}
	return nil
}

// traces deletes the traces (queue-admin-api.md §6) of messages that are
// gone, below their partition's floor or in no segment any more, and those
// older than MetricsAge (when set). One statement: each trace with an index probe
// into its partition's segments.
func (s *Sweeper) traces(ctx context.Context, conn *pgxpool.Conn, st *Stats) error {
	tag, err := conn.Exec(ctx, `DELETE FROM queen.traces t
		 WHERE ($1 > 0 AND t.created_at < now() - make_interval(secs => $1))
		    OR t.message_offset < (SELECT p.floor_offset FROM queen.partitions p WHERE p.id = t.partition_id)
		    OR coalesce((SELECT s.base_offset + s.frame_count FROM queen.log_segments s
		                  WHERE s.partition_id = t.partition_id AND s.base_offset <= t.message_offset
		                  ORDER BY s.base_offset DESC LIMIT 1), -1) <= t.message_offset`, s.set.MetricsAge.Seconds())
	st.Traces = tag.RowsAffected()
	if err != nil {
		return fmt.Errorf("retention: traces: %w", err)
	}
	return nil
}

// idlePartitions deletes, with their cursors, partitions that hold no
// segment and no dead letter (whose message Queen keeps too), and that neither a push nor a consumer touched for the cleanup
// age. The age is checked again on the row deleted, so that a push that
// lands meanwhile keeps its partition; a push that comes after finds the
// partition gone and the broker resolves it anew.
func (s *Sweeper) idlePartitions(ctx context.Context, conn *pgxpool.Conn, st *Stats) error {
	tag, err := conn.Exec(ctx, `DELETE FROM queen.partitions p
		 WHERE p.id IN (
		       SELECT x.id FROM queen.partitions x
		        WHERE COALESCE(x.last_push_at, x.created_at) < now() - make_interval(secs => $1)
		          AND NOT EXISTS (SELECT FROM queen.log_segments s WHERE s.partition_id = x.id)
		          AND NOT EXISTS (SELECT FROM queen.dead_letters d WHERE d.partition_id = x.id)
		          AND NOT EXISTS (SELECT FROM queen.cursors c WHERE c.partition_id = x.id
		                             AND c.last_consumed_at >= now() - make_interval(secs => $1))
		        LIMIT $2)
		   AND COALESCE(p.last_push_at, p.created_at) < now() - make_interval(secs => $1)`,
		s.set.CleanupAfter.Seconds(), cleanupCap)
	st.Partitions = tag.RowsAffected()
	if err != nil {
		return fmt.Errorf("retention: idle partitions: %w", err)
	}
	return nil
}

// trim runs a chunked DELETE of log segments that returns the partition and
// body size of each (its last parameter is the chunk size) until it deletes
// less than a chunk, and returns how many segments went. Each chunk takes
// its bytes off the partitions' stored_bytes (the counter the tenant
// quota's maxStoredBytes is checked against) in the same transaction,
// locking the partitions in id order as pushes do, so that the two never
// deadlock.
func trim(ctx context.Context, conn *pgxpool.Conn, chunk int, sql string, args ...any) (int64, error) {
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
		if n < int64(chunk) {
			return total, nil
		}
	}
}

// drain runs a chunked DELETE (its last parameter is the chunk size) until
// it deletes less than a chunk, and returns how many rows went.
func drain(ctx context.Context, conn *pgxpool.Conn, chunk int, sql string, args ...any) (int64, error) {
	var total int64
	args = append(args, chunk)
	for {
		tag, err := conn.Exec(ctx, sql, args...)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(chunk) {
			return total, nil
		}
	}
}
