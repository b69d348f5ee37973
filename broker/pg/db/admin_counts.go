package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// How the resources and status routes count (queue-admin-api.md §3), from
// Regent's model and never from the log's contents: a partition's offsets
// are never reused, so next_offset is every message it was ever given, and
// its first stored offset (the lowest segment base, or the partition's floor
// when retention or eviction deleted inside that segment) tells how many are
// still stored. A cursor's pending is
// what lies between its committed offset and the partition's end, and its
// processing is the unacked rest of a live leased batch. Each counter of a
// partition is its maximum over the partition's cursors (the group furthest
// behind); a partition with no cursor counts as one queue-mode group at the
// beginning.
//
// partitionCounts is the one statement all of them build on: the tenant's
// partitions (of one queue when $2 is not NULL), each with four index
// probes: the first segment (log_segments_pkey, its lowest key), the
// cursors (cursors_pkey, by partition_id), the dead letters (the prefix of
// dead_letters_pkey, counted from the index) and, through the queue,
// queues_tenant_name_key or a scan of the tenant's queues. Each probe is a
// lateral sub-select with a FROM, correlated by the partition id alone:
// what Citus pushes down to the partition's shard.
const partitionCounts = `
	SELECT p.queue_id, p.partition_id, p.name, p.created_at, p.next_offset AS given,
	       p.next_offset - p.first AS total,
	       coalesce(c.pending, p.next_offset - p.first) AS pending,
	       coalesce(c.waiting, p.next_offset - p.first) AS waiting,
	       coalesce(c.processing, 0) AS processing,
	       coalesce(c.consumed, 0) AS consumed, c.last_activity, c.behind,
	       d.n AS dead_letter, p.first
	  FROM (SELECT q.id AS queue_id, pa.id AS partition_id, pa.name, pa.created_at, pa.next_offset,
	               greatest(coalesce(fs.base_offset, pa.next_offset), pa.floor_offset) AS first
	          FROM queen.queues q
	          JOIN queen.partitions pa ON pa.queue_id = q.id
	          LEFT JOIN LATERAL (SELECT s.base_offset FROM queen.log_segments s
	                              WHERE s.partition_id = pa.id ORDER BY s.base_offset LIMIT 1) fs ON true
	         WHERE q.tenant = $1 AND ($2::text IS NULL OR q.name = $2)) p
	  LEFT JOIN LATERAL (
	       SELECT max(l.pending) AS pending, max(l.pending - l.processing) AS waiting,
	              max(l.processing) AS processing, sum(l.total_consumed) AS consumed,
	              max(l.last_consumed_at) AS last_activity, min(l.behind) AS behind
	         FROM (SELECT x.total_consumed, x.last_consumed_at, greatest(x.committed, p.first) AS behind,
	                      greatest(p.next_offset - greatest(x.committed, p.first), 0) AS pending,
	                      CASE WHEN x.lease_id IS NOT NULL AND queen.lease_live(x.lease_expires_at)
	                           THEN least(greatest(x.batch_end - greatest(x.committed, p.first), 0),
	                                      greatest(p.next_offset - greatest(x.committed, p.first), 0))
	                           ELSE 0 END AS processing
	                 FROM queen.cursors x WHERE x.partition_id = p.partition_id) l) c ON true
	  LEFT JOIN LATERAL (SELECT count(*) AS n FROM queen.dead_letters d WHERE d.partition_id = p.partition_id) d ON true`

// MessageCounts are the counters of §3 over some partitions. Pending includes
// processing; Waiting is pending without it.
type MessageCounts struct {
	Total, Pending, Waiting, Processing, DeadLetter int64
}

// Completed is what is stored and neither pending nor dead-lettered.
func (c MessageCounts) Completed() int64 { return max(c.Total-c.Pending-c.DeadLetter, 0) }

// Add sums o into c.
func (c *MessageCounts) Add(o MessageCounts) {
	c.Total += o.Total
	c.Pending += o.Pending
	c.Waiting += o.Waiting
	c.Processing += o.Processing
	c.DeadLetter += o.DeadLetter
}

// QueueSummary is a queue of the tenant with its settings and summed counts.
type QueueSummary struct {
	ID                         uuid.UUID
	Name, Namespace, Task      string
	CreatedAt                  time.Time
	LeaseTime, RetryLimit      int
	RetryDelay, TTL, Priority  int
	MaxSize                    int
	DeadLetterQueue, Encrypted bool
	Partitions                 int
	// Given is every message the queue was ever given (read by Queues
	// only), Consumed the sum of its cursors' consumed counts.
	Given, Consumed int64
	Counts          MessageCounts
}

const queueColumns = `q.id, q.name, coalesce(q.namespace, ''), coalesce(q.task, ''), q.created_at,
	q.lease_time, q.retry_limit, q.retry_delay, q.ttl, q.priority, q.max_size, q.dead_letter_queue,
	q.encryption_enabled`

// QueueSummaries lists the tenant's queues, newest first, with the counts of their
// partitions summed: partitionCounts once, grouped by queue.
func (d *DB) QueueSummaries(ctx context.Context, tenant string) ([]QueueSummary, error) {
	return collect(ctx, d, `SELECT `+queueColumns+`, count(pc.partition_id)::int,
			coalesce(sum(pc.given), 0)::bigint, coalesce(sum(pc.consumed), 0)::bigint, coalesce(sum(pc.total), 0)::bigint, coalesce(sum(pc.pending), 0)::bigint,
			coalesce(sum(pc.waiting), 0)::bigint, coalesce(sum(pc.processing), 0)::bigint, coalesce(sum(pc.dead_letter), 0)::bigint
		  FROM queen.queues q
		  LEFT JOIN (`+partitionCounts+`) pc ON pc.queue_id = q.id
		 WHERE q.tenant = $1
		 GROUP BY q.id
		 ORDER BY q.created_at DESC, q.name`, "list queues", func(r pgx.CollectableRow) (QueueSummary, error) {
		var q QueueSummary
		err := r.Scan(queueFields(&q, &q.Partitions, &q.Given, &q.Consumed, &q.Counts.Total, &q.Counts.Pending,
			&q.Counts.Waiting, &q.Counts.Processing, &q.Counts.DeadLetter)...)
		return q, err
	}, tenant, nil)
}

func queueFields(q *QueueSummary, more ...any) []any {
	return append([]any{&q.ID, &q.Name, &q.Namespace, &q.Task, &q.CreatedAt, &q.LeaseTime, &q.RetryLimit,
		&q.RetryDelay, &q.TTL, &q.Priority, &q.MaxSize, &q.DeadLetterQueue, &q.Encrypted}, more...)
}

// PartitionSummary is one partition of a queue with its counts.
type PartitionSummary struct {
	ID                    uuid.UUID
	Name                  string
	CreatedAt             time.Time
	Counts                MessageCounts
	Consumed              int64
	LastActivity          *time.Time
	OldestPending, Newest *time.Time
}

// QueueDetail returns one queue of the tenant and its partitions sorted by
// name, or nil when the tenant has no such queue. Two statements in one
// round trip: the queue by queues_tenant_name_key, and partitionCounts for
// it plus two probes of log_segments_pkey per partition for the oldest
// pending and the newest message (segment granularity: a segment's
// min_created_at and max_created_at).
func (d *DB) QueueDetail(ctx context.Context, tenant, name string) (*QueueSummary, []PartitionSummary, error) {
	var q *QueueSummary
	var parts []PartitionSummary
	b := &pgx.Batch{}
	b.Queue(`SELECT `+queueColumns+` FROM queen.queues q WHERE q.tenant = $1 AND q.name = $2`, tenant, name).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				q = &QueueSummary{}
				if err := rows.Scan(queueFields(q)...); err != nil {
					return err
				}
			}
			return rows.Err()
		})
	b.Queue(`SELECT pc.partition_id, pc.name, pc.created_at,
			pc.total, pc.pending, pc.waiting, pc.processing, pc.dead_letter, pc.consumed, pc.last_activity,
			CASE WHEN pc.pending > 0 THEN (SELECT s.min_created_at FROM queen.log_segments s
			      WHERE s.partition_id = pc.partition_id AND s.base_offset + s.frame_count > coalesce(pc.behind, pc.first)
			      ORDER BY s.base_offset LIMIT 1) END,
			(SELECT s.max_created_at FROM queen.log_segments s WHERE s.partition_id = pc.partition_id
			  ORDER BY s.base_offset DESC LIMIT 1)
		  FROM (`+partitionCounts+`) pc
		 ORDER BY pc.name`, tenant, name).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var p PartitionSummary
			c := &p.Counts
			if err := rows.Scan(&p.ID, &p.Name, &p.CreatedAt, &c.Total, &c.Pending, &c.Waiting, &c.Processing,
				&c.DeadLetter, &p.Consumed, &p.LastActivity, &p.OldestPending, &p.Newest); err != nil {
				return err
			}
			parts = append(parts, p)
		}
		return rows.Err()
	})
	if err := d.q.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, fmt.Errorf("describe queue %q: %w", name, err)
	}
	if q == nil {
		return nil, nil, nil
	}
	for _, p := range parts {
		q.Partitions++
		q.Consumed += p.Consumed
		q.Counts.Add(p.Counts)
	}
	return q, parts, nil
}

// Overview is the tenant-wide figures of GET /api/v1/resources/overview.
type Overview struct {
	Queues, Partitions, Namespaces, Tasks int
	// Given is every message ever pushed: the sum of the partitions' ends.
	Given  int64
	Counts MessageCounts
	// Over the partitions' pending counts.
	PendingAvg, PendingMedian float64
	PendingMin, PendingMax    int64
}

// Overview sums partitionCounts over the tenant: one statement. The
// queues' figures and the partitions' are apart, each a row of its own
// that the statement joins: on Citus, where the queues are a reference
// table, no sub-select of the one sits in the other's target list.
func (d *DB) Overview(ctx context.Context, tenant string) (Overview, error) {
	var o Overview
	err := d.q.QueryRow(ctx, `WITH qs AS (
			SELECT count(*)::int AS queues,
			       count(DISTINCT q.namespace) FILTER (WHERE q.namespace <> '')::int AS namespaces,
			       count(DISTINCT q.task) FILTER (WHERE q.task <> '')::int AS tasks
			  FROM queen.queues q WHERE q.tenant = $1),
		ps AS (
			SELECT count(*)::int AS partitions,
			coalesce(sum(pc.given), 0)::bigint AS given, coalesce(sum(pc.total), 0)::bigint AS total,
			coalesce(sum(pc.pending), 0)::bigint AS pending, coalesce(sum(pc.waiting), 0)::bigint AS waiting,
			coalesce(sum(pc.processing), 0)::bigint AS processing, coalesce(sum(pc.dead_letter), 0)::bigint AS dead_letter,
			coalesce(avg(pc.pending), 0)::float8 AS pending_avg,
			coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY pc.pending), 0)::float8 AS pending_median,
			coalesce(min(pc.pending), 0)::bigint AS pending_min, coalesce(max(pc.pending), 0)::bigint AS pending_max
		  FROM (`+partitionCounts+`) pc)
		SELECT qs.queues, ps.partitions, qs.namespaces, qs.tasks, ps.given, ps.total, ps.pending, ps.waiting,
		       ps.processing, ps.dead_letter, ps.pending_avg, ps.pending_median, ps.pending_min, ps.pending_max
		  FROM qs, ps`, tenant, nil).Scan(&o.Queues, &o.Partitions, &o.Namespaces, &o.Tasks,
		&o.Given, &o.Counts.Total, &o.Counts.Pending, &o.Counts.Waiting, &o.Counts.Processing, &o.Counts.DeadLetter,
		&o.PendingAvg, &o.PendingMedian, &o.PendingMin, &o.PendingMax)
	if err != nil {
		return o, fmt.Errorf("overview: %w", err)
	}
	return o, nil
}

// LeaseFigures are the figures of the tenant's live leases and dead letters on
// GET /api/v1/status.
type LeaseFigures struct {
	Active, Partitions          int
	BatchSize, Acked            int64
	DeadLetters, DeadPartitions int64
	TopErrors                   []ErrorCount
}

// ErrorCount is a dead-letter error message and how many entries carry it.
type ErrorCount struct {
	Error string `json:"error"`
	Count int64  `json:"count"`
}

// LeaseFigures reads the tenant's live leases and dead letters: a scan of the
// tenant's cursors that hold a lease (cursors_lease_idx), and of its dead
// letters, in one round trip.
func (d *DB) LeaseFigures(ctx context.Context, tenant string) (LeaseFigures, error) {
	var l LeaseFigures
	b := &pgx.Batch{}
	b.Queue(`SELECT count(DISTINCT x.lease_id)::int, count(DISTINCT x.partition_id)::int,
			coalesce(sum(x.batch_end - x.batch_start), 0)::bigint, coalesce(sum(greatest(x.committed - x.batch_start, 0)), 0)::bigint
		  FROM queen.cursors x
		  JOIN queen.partitions p ON p.id = x.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id AND q.tenant = $1
		 WHERE x.lease_id IS NOT NULL AND queen.lease_live(x.lease_expires_at)`, tenant).
		QueryRow(func(r pgx.Row) error { return r.Scan(&l.Active, &l.Partitions, &l.BatchSize, &l.Acked) })
	b.Queue(`SELECT count(*), count(DISTINCT d.partition_id) FROM queen.dead_letters d
		  JOIN queen.partitions p ON p.id = d.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id AND q.tenant = $1`, tenant).
		QueryRow(func(r pgx.Row) error { return r.Scan(&l.DeadLetters, &l.DeadPartitions) })
	b.Queue(`SELECT coalesce(d.error_message, ''), count(*) FROM queen.dead_letters d
		  JOIN queen.partitions p ON p.id = d.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id AND q.tenant = $1
		 GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5`, tenant).Query(func(rows pgx.Rows) error {
		var err error
		l.TopErrors, err = pgx.CollectRows(rows, pgx.RowToStructByPos[ErrorCount])
		return err
	})
	if err := d.q.SendBatch(ctx, b).Close(); err != nil {
		return l, fmt.Errorf("read leases and dead letters: %w", err)
	}
	if l.TopErrors == nil {
		l.TopErrors = []ErrorCount{}
	}
	return l, nil
}
