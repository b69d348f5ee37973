package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sweepLock is the advisory lock of the retention and eviction sweeps
// ("retain" in ASCII): one sweep of either runs at a time in the cluster.
const sweepLock int64 = 0x72657461696e

// Sweeping is a connection that holds the sweeps' lock, for one sweep's
// statements.
type Sweeping struct{ conn *pgxpool.Conn }

// Sweep runs sweep on a connection holding the sweeps' lock, and reports
// false, running nothing, when another replica holds it. It first
// summarizes the block ranges of the log's time index added since, which
// queen.floors_to_raise needs (see TrimDedup for why).
func (d *DB) Sweep(ctx context.Context, sweep func(*Sweeping) error) (bool, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire a connection for the sweep: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, sweepLock).Scan(&locked); err != nil {
		return false, fmt.Errorf("take the sweeps' lock: %w", err)
	}
	if !locked {
		return false, nil
	}
	defer func() {
		// A session lock outlives a cancelled context on a pooled
		// connection unless released with a fresh one.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, sweepLock)
	}()
	if _, err := conn.Exec(ctx, `SELECT brin_summarize_new_values('queen.log_segments_time_brin')`); err != nil {
		return true, fmt.Errorf("summarize the log's time index: %w", err)
	}
	return true, sweep(&Sweeping{conn: conn})
}

// Rule is a queue setting that bounds how long messages stay.
type Rule int

const (
	RetentionSeconds          Rule = iota // retentionEnabled and retentionSeconds
	CompletedRetentionSeconds             // retentionEnabled and completedRetentionSeconds
	MaxWaitTimeSeconds                    // eviction, whatever retentionEnabled says
)

var rules = [...]string{
	RetentionSeconds:          `SELECT id, retention_seconds FROM queen.queues WHERE retention_enabled AND retention_seconds > 0`,
	CompletedRetentionSeconds: `SELECT id, completed_retention_seconds FROM queen.queues WHERE retention_enabled AND completed_retention_seconds > 0`,
	MaxWaitTimeSeconds:        `SELECT id, max_wait_time_seconds FROM queen.queues WHERE max_wait_time_seconds > 0`,
}

// Policy is a queue's age limit under a rule.
type Policy struct {
	Queue   uuid.UUID
	Seconds int
}

// Policies lists the queues that set rule.
func (s *Sweeping) Policies(ctx context.Context, rule Rule) ([]Policy, error) {
	rows, err := s.conn.Query(ctx, rules[rule])
	if err != nil {
		return nil, fmt.Errorf("list the queues to sweep: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Policy])
	if err != nil {
		return nil, fmt.Errorf("list the queues to sweep: %w", err)
	}
	return out, nil
}

// Raises are partitions of one shard whose floors a rule raises, and
// where each goes: one call's work.
type Raises struct {
	Shard      uuid.UUID // the call's distribution argument, the first of them
	Partitions []uuid.UUID
	Floors     []int64
}

// FloorsToRaise lists the queue's partitions whose floors p raises
// (consumed: only past what every cursor has consumed), with where each
// goes, grouped by shard (queen.floors_to_raise): on PostgreSQL, one group.
// It writes nothing: RaiseFloors raises each group.
func (s *Sweeping) FloorsToRaise(ctx context.Context, p Policy, consumed bool) ([]Raises, error) {
	rows, err := s.conn.Query(ctx, `SELECT shard, partitions, floors
		FROM queen.floors_to_raise(p_queue_id => $1, p_seconds => $2, p_consumed => $3)`, p.Queue, p.Seconds, consumed)
	if err != nil {
		return nil, fmt.Errorf("find the floors of queue %s to raise: %w", p.Queue, err)
	}
	raises, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Raises])
	if err != nil {
		return nil, fmt.Errorf("find the floors of queue %s to raise: %w", p.Queue, err)
	}
	return raises, nil
}

// Floor is what raising one partition's floor did: Removed offsets went
// below it, and Released tells that a lease the floor passed ended.
type Floor struct {
	Partition uuid.UUID
	Removed   int64
	Released  bool
}

// RaiseFloors raises the floors of one shard's partitions in a transaction
// of its own (queen.raise_floors_v2): one call, which Citus sends whole to
// the shard's worker.
func (s *Sweeping) RaiseFloors(ctx context.Context, r Raises) ([]Floor, error) {
	rows, err := s.conn.Query(ctx, `SELECT partition_id, removed, released
		FROM queen.raise_floors_v2(p_shard => $1, p_partitions => $2, p_floors => $3)`, r.Shard, r.Partitions, r.Floors)
	if err != nil {
		return nil, fmt.Errorf("raise the floors of %d partitions: %w", len(r.Partitions), err)
	}
	floors, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Floor])
	if err != nil {
		return nil, fmt.Errorf("raise the floors of %d partitions: %w", len(r.Partitions), err)
	}
	return floors, nil
}

// RecordRemoved records in queen.retention_events, under kind, what went
// below the floors of the queue's partitions, for the analytics.
func (s *Sweeping) RecordRemoved(ctx context.Context, queue uuid.UUID, kind string, floors []Floor) error {
	var raised []uuid.UUID
	var removed []int64
	for _, f := range floors {
		if f.Removed > 0 {
			raised, removed = append(raised, f.Partition), append(removed, f.Removed)
		}
	}
	if len(raised) == 0 {
		return nil
	}
	if _, err := s.conn.Exec(ctx, `INSERT INTO queen.retention_events (tenant, queue, partition_id, kind, messages)
		SELECT q.tenant, q.name, u.pid, $3, u.n
		  FROM unnest($1::uuid[], $2::bigint[]) AS u (pid, n), queen.queues q
		 WHERE q.id = $4`, raised, removed, kind, queue); err != nil {
		return fmt.Errorf("record the %s of queue %s: %w", kind, queue, err)
	}
	return nil
}

// DropBelowFloors drops the queue's segments that lie wholly below their
// floors (queen.segments_below_floors finds them), shard by shard and chunk
// at a time, each a call and a transaction of its own
// (queen.drop_below_floors_v2, which Citus sends whole to the shard's
// worker), and returns how many went.
func (s *Sweeping) DropBelowFloors(ctx context.Context, queue uuid.UUID, chunk int) (int64, error) {
	type below struct {
		Shard      uuid.UUID
		Partitions []uuid.UUID
	}
	rows, err := s.conn.Query(ctx, `SELECT shard, partitions FROM queen.segments_below_floors(p_queue_id => $1)`, queue)
	if err != nil {
		return 0, fmt.Errorf("find the segments of queue %s below their floors: %w", queue, err)
	}
	groups, err := pgx.CollectRows(rows, pgx.RowToStructByPos[below])
	if err != nil {
		return 0, fmt.Errorf("find the segments of queue %s below their floors: %w", queue, err)
	}
	var total int64
	for _, g := range groups {
		n, err := drain(chunk, func() (n int64, err error) {
			err = s.conn.QueryRow(ctx, `SELECT queen.drop_below_floors_v2(p_shard => $1, p_partitions => $2, p_chunk => $3)`,
				g.Shard, g.Partitions, chunk).Scan(&n)
			return n, err
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("drop the segments of queue %s below their floors: %w", queue, err)
		}
	}
	return total, nil
}

// TrimDedup deletes the push dedup rows older than their queue's
// dedupWindowSeconds, or window (--dedup-window) for a queue that sets none,
// chunk at a time.
//
// The BRIN index finds the expired rows by block range, but a range no
// vacuum has summarized yet matches every search, so each sweep would read
// every row pushed since the last vacuum: on a table growing by thousands
// of rows a second, a part of the window that grows with it. Summarizing
// first reads those blocks once, and the sweep then reads only the ranges
// that hold expired rows.
func (s *Sweeping) TrimDedup(ctx context.Context, window time.Duration, chunk int) (int64, error) {
	if _, err := s.conn.Exec(ctx, `SELECT brin_summarize_new_values('queen.push_dedup_created_brin')`); err != nil {
		return 0, fmt.Errorf("summarize dedup rows: %w", err)
	}
	// The shortest window of any queue bounds the search the index serves;
	// each row then goes by its own queue's window. A row whose partition
	// is gone has none, and goes by window. The rows go by their key, which
	// Citus can plan over the shards (a ctid names a row of one table only).
	n, err := drain(chunk, func() (int64, error) {
		tag, err := s.conn.Exec(ctx, `DELETE FROM queen.push_dedup
			 WHERE (partition_id, transaction_id) IN (
			       SELECT d.partition_id, d.transaction_id FROM queen.push_dedup d
			         LEFT JOIN queen.partitions p ON p.id = d.partition_id
			         LEFT JOIN queen.queues q ON q.id = p.queue_id
			        WHERE d.created_at < now() - make_interval(secs =>
			                  (SELECT least($1, min(dedup_window_seconds)) FROM queen.queues))
			          AND d.created_at < now() - make_interval(secs => coalesce(q.dedup_window_seconds, $1))
			        LIMIT $2)`, window.Seconds(), chunk)
		return tag.RowsAffected(), err
	})
	if err != nil {
		return n, fmt.Errorf("delete dedup rows: %w", err)
	}
	return n, nil
}

// drain runs step, which removes at most chunk rows, until it removes less
// than a chunk, and returns how many rows went.
func drain(chunk int, step func() (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := step()
		total += n
		if err != nil || n < int64(chunk) {
			return total, err
		}
	}
}

// DeleteGoneTraces deletes the traces of messages that are gone, below
// their partition's floor or in no segment any more, and, when age is set,
// those older than age. One statement: each trace with an index probe into
// its partition's segments.
func (s *Sweeping) DeleteGoneTraces(ctx context.Context, age time.Duration) (int64, error) {
	tag, err := s.conn.Exec(ctx, `DELETE FROM queen.traces t
		 WHERE ($1 > 0 AND t.created_at < now() - make_interval(secs => $1))
		    OR t.message_offset < (SELECT p.floor_offset FROM queen.partitions p WHERE p.id = t.partition_id)
		    OR coalesce((SELECT s.base_offset + s.frame_count FROM queen.log_segments s
		                  WHERE s.partition_id = t.partition_id AND s.base_offset <= t.message_offset
		                  ORDER BY s.base_offset DESC LIMIT 1), -1) <= t.message_offset`, age.Seconds())
	if err != nil {
		return 0, fmt.Errorf("delete traces: %w", err)
	}
	return tag.RowsAffected(), nil
}

// DeleteOldMinutes deletes the per-minute counters and history, the
// replica samples and the retention events older than age.
func (s *Sweeping) DeleteOldMinutes(ctx context.Context, age time.Duration) error {
	for _, table := range []string{"queen.queue_minutes WHERE minute", "queen_streams.query_minutes WHERE minute",
		"queen.group_minutes WHERE minute", "queen.replica_samples WHERE minute", "queen.retention_events WHERE at"} {
		if _, err := s.conn.Exec(ctx, `DELETE FROM `+table+` < now() - make_interval(secs => $1)`, age.Seconds()); err != nil {
			return fmt.Errorf("delete old rows of %s: %w", table, err)
		}
	}
	return nil
}

// DeleteIdlePartitions deletes, with their cursors, at most max partitions
// that hold no segment and no dead letter (whose message Queen keeps too),
// and that neither a push nor a consumer touched for idle. The age is
// checked again on the row deleted, so that a push that lands meanwhile
// keeps its partition; a push that comes after finds the partition gone and
// the broker resolves it anew.
func (s *Sweeping) DeleteIdlePartitions(ctx context.Context, idle time.Duration, max int) (int64, error) {
	tag, err := s.conn.Exec(ctx, `DELETE FROM queen.partitions p
		 WHERE p.id IN (
		       SELECT x.id FROM queen.partitions x
		        WHERE COALESCE(x.last_push_at, x.created_at) < now() - make_interval(secs => $1)
		          AND NOT EXISTS (SELECT FROM queen.log_segments s WHERE s.partition_id = x.id)
		          AND NOT EXISTS (SELECT FROM queen.dead_letters d WHERE d.partition_id = x.id)
		          AND NOT EXISTS (SELECT FROM queen.cursors c WHERE c.partition_id = x.id
		                             AND c.last_consumed_at >= now() - make_interval(secs => $1))
		        LIMIT $2)
		   AND COALESCE(p.last_push_at, p.created_at) < now() - make_interval(secs => $1)`, idle.Seconds(), max)
	if err != nil {
		return 0, fmt.Errorf("delete idle partitions: %w", err)
	}
	return tag.RowsAffected(), nil
}
