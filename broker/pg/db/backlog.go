package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// groupsSQL reads every cursor with its partition's next offset, and, for a
// cursor that is behind, the creation time of the segment holding its first
// unconsumed offset.
//
// Cost, per refresh: one statement. It scans queen.cursors once (one row per
// partition and group, never per message), joins each row to its partition
// and queue by primary key (or a hash join over both small tables), and, for
// each cursor that is behind, probes queen.log_segments' primary key
// (partition_id, base_offset) at most twice: the last segment that starts at
// or before the cursor, and, when retention removed the one holding it, the
// first after. No segment body is read.
//
// The lag counts offsets, so offsets that retention deleted before the group
// read them still count, as they do for Queen. The age is that of the oldest
// frame of the segment holding the first unconsumed offset: when the group
// stopped inside a push request's segment, it overstates by at most the time
// that one push spanned.
const groupsSQL = `
SELECT q.tenant, q.name, c.consumer_group,
       sum(p.next_offset - c.committed)::bigint,
       coalesce(extract(epoch FROM now() - min(s.min_created_at)), 0)::float8
  FROM queen.cursors c
  JOIN queen.partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
  LEFT JOIN LATERAL (
        SELECT x.min_created_at FROM (
            (SELECT base_offset, frame_count, min_created_at FROM queen.log_segments
              WHERE partition_id = c.partition_id AND base_offset <= c.committed
              ORDER BY base_offset DESC LIMIT 1)
            UNION ALL
            (SELECT base_offset, frame_count, min_created_at FROM queen.log_segments
              WHERE partition_id = c.partition_id AND base_offset > c.committed
              ORDER BY base_offset LIMIT 1)
        ) x
         WHERE x.base_offset + x.frame_count > c.committed
         ORDER BY x.base_offset LIMIT 1
       ) s ON c.committed < p.next_offset
 GROUP BY q.tenant, q.name, c.consumer_group`

// deadLettersSQL counts the dead letters of each queue. Cost: one pass over
// queen.dead_letters, an index-only scan of its primary key where the
// visibility map allows. Dead letters are the exceptions a team inspects and
// clears, so the table stays small next to the log.
const deadLettersSQL = `
SELECT q.tenant, q.name, count(*)
  FROM queen.dead_letters d
  JOIN queen.partitions p ON p.id = d.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 GROUP BY q.tenant, q.name`

// BacklogGroup is one consumer group's position on one queue.
type BacklogGroup struct {
	Tenant, Queue, Group string
	Lag                  int64   // offsets pushed and not yet consumed, over the queue's partitions
	OldestAgeSeconds     float64 // age of the oldest unconsumed message; 0 when caught up
}

// BacklogDeadLetters is the number of dead letters of one queue.
type BacklogDeadLetters struct {
	Tenant, Queue string
	Count         int64
}

// Backlog is what waits in the database: each consumer group's lag on
// each queue, and each queue's dead letters.
type Backlog struct {
	Groups      []BacklogGroup
	DeadLetters []BacklogDeadLetters
}

// Backlog runs both queries once.
func (d *DB) Backlog(ctx context.Context) (Backlog, error) {
	var s Backlog
	var err error
	s.Groups, err = collect(ctx, d, groupsSQL, "read consumer group lag", func(r pgx.CollectableRow) (g BacklogGroup, err error) {
		return g, r.Scan(&g.Tenant, &g.Queue, &g.Group, &g.Lag, &g.OldestAgeSeconds)
	})
	if err != nil {
		return s, err
	}
	s.DeadLetters, err = collect(ctx, d, deadLettersSQL, "read dead letters", func(r pgx.CollectableRow) (l BacklogDeadLetters, err error) {
		return l, r.Scan(&l.Tenant, &l.Queue, &l.Count)
	})
	return s, err
}

// collect runs a statement and scans each of its rows; what says, in an
// error, what it was doing.
func collect[T any](ctx context.Context, d *DB, sql, what string, scan pgx.RowToFunc[T], args ...any) ([]T, error) {
	rows, err := d.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// RecordGroupMinutes writes each group's lag as the sample of minute, for
// the console's charts: one statement, and a later sample of the same
// minute (this replica's or another's) replaces it.
func (d *DB) RecordGroupMinutes(ctx context.Context, minute time.Time, groups []BacklogGroup) error {
	if len(groups) == 0 {
		return nil
	}
	tenants, queues, names := make([]string, len(groups)), make([]string, len(groups)), make([]string, len(groups))
	lags, ages := make([]int64, len(groups)), make([]float64, len(groups))
	for i, g := range groups {
		tenants[i], queues[i], names[i], lags[i], ages[i] = g.Tenant, g.Queue, g.Group, g.Lag, g.OldestAgeSeconds
	}
	_, err := d.q.Exec(ctx, `INSERT INTO queen.group_minutes (tenant, queue, consumer_group, minute, lag, lag_seconds)
		SELECT u.tenant, u.queue, u.grp, date_trunc('minute', $6::timestamptz), u.lag, u.age
		  FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::float8[]) AS u (tenant, queue, grp, lag, age)
		ON CONFLICT (tenant, queue, minute, consumer_group) DO UPDATE SET lag = EXCLUDED.lag, lag_seconds = EXCLUDED.lag_seconds`,
		tenants, queues, names, lags, ages, minute)
	if err != nil {
		return fmt.Errorf("record %d groups' lag: %w", len(groups), err)
	}
	return nil
}
