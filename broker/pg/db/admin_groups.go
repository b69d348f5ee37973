package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The admin API's consumer-group routes (queue-admin-api.md §1) read and
// move queen.cursors and queen.subscriptions. Every
// statement is limited to one tenant's queues, so another tenant's group or
// queue reads exactly like a missing one.
//
// How Regent's model answers Queen's terms. A group's cursor on a partition
// is a queen.cursors row, created by the group's first pop of the partition
// at the start its subscription gives; a partition the group has not
// reached has no row, and is Queen's "unmoved" cursor: where it starts is
// decided only when the group first pops it, from the queue's subscription
// row as it is then. (A seek to before every message fixes the cursor where
// the subscription starts at the time of the seek, rather than leaving it
// unresolved as Queen does.) The subscription row is Queen's record; a start of
// '-infinity' is mode all, for which Queen keeps no record, so it is
// reported and updated as none. The oldest unconsumed message of a cursor
// is read at segment granularity (the first segment past committed, its
// min_created_at), as the pop's subscription start is.

// tenantCursors is the tenant's cursors, c, with their queue and
// partition, as a CTE: the statement that follows it calls
// queen.oldest_unconsumed on c's rows (oldestJoin). MATERIALIZED, so that
// on Citus the cursors are read over the shards first and the calls run on
// the coordinator, each a statement on its partition's shard: a function
// that reads a distributed table cannot run inside a statement pushed to
// the shards. filter narrows the cursors read ("" for none).
func tenantCursors(filter string) string {
	return `WITH c AS MATERIALIZED (
		SELECT c.consumer_group, q.id AS queue_id, q.name AS queue, p.name AS partition, c.partition_id,
		       c.lease_id, c.lease_expires_at, c.committed, p.next_offset, c.last_consumed_at, c.total_consumed,
		       c.batch_end
		  FROM queen.cursors c
		  JOIN queen.partitions p ON p.id = c.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id AND q.tenant = $1 ` + filter + `)`
}

// oldestJoin joins o.oldest, the creation time of the oldest message that
// cursor c of tenantCursors has not consumed, or NULL.
const oldestJoin = `LEFT JOIN LATERAL queen.oldest_unconsumed(p_partition_id => c.partition_id, p_committed => c.committed,
	p_next_offset => c.next_offset) o ON true`

// GroupSummary is one (group, queue) pair of the group list.
type GroupSummary struct {
	Name, Queue          string
	Members, WithLag     int
	LagMessages          int64
	Oldest               *time.Time // oldest unconsumed message over the pair's cursors
	Moved                bool       // any cursor moved by an ack, an auto-ack, a seek or a pop
	SubMode              *string
	SubStart, SubCreated *time.Time
}

// ConsumerGroups lists the tenant's (group, queue) pairs that hold a cursor, sorted
// by group, then queue. One statement: a scan of the tenant's cursors, each
// with two index probes into its partition's segments.
func (d *DB) ConsumerGroups(ctx context.Context, tenant string) ([]GroupSummary, error) {
	return collect(ctx, d, tenantCursors("")+`
		SELECT c.consumer_group, c.queue, count(*)::int,
			count(*) FILTER (WHERE o.oldest IS NOT NULL)::int,
			coalesce(sum(greatest(c.next_offset - c.committed, 0)), 0)::bigint,
			min(o.oldest), bool_or(c.last_consumed_at IS NOT NULL OR c.batch_end IS NULL),
			sub.mode, sub.starts_after, sub.created_at
		  FROM c
		  `+oldestJoin+`
		  LEFT JOIN LATERAL (SELECT coalesce(x.mode, CASE WHEN x.starts_after = x.created_at THEN 'new' ELSE 'timestamp' END) AS mode,
		                            x.starts_after, x.created_at
		                       FROM queen.subscriptions x
		                      WHERE x.queue_id = c.queue_id AND x.consumer_group = c.consumer_group
		                        AND x.starts_after > '-infinity') sub ON true
		 GROUP BY c.consumer_group, c.queue, sub.mode, sub.starts_after, sub.created_at
		 ORDER BY c.consumer_group, c.queue`, "list consumer groups", func(r pgx.CollectableRow) (GroupSummary, error) {
		var g GroupSummary
		err := r.Scan(&g.Name, &g.Queue, &g.Members, &g.WithLag, &g.LagMessages, &g.Oldest, &g.Moved,
			&g.SubMode, &g.SubStart, &g.SubCreated)
		return g, err
	}, tenant)
}

// GroupCursor is one cursor of a group on a partition, with its lag.
type GroupCursor struct {
	Group, Queue, Partition string
	PartitionID             uuid.UUID
	LeaseID                 *uuid.UUID
	LeaseActive             bool
	OffsetLag               int64
	Oldest                  *time.Time
	LastConsumedAt          *time.Time
	TotalConsumed           int64
}

const cursorColumns = `c.consumer_group, c.queue, c.partition, c.partition_id, c.lease_id,
	c.lease_id IS NOT NULL AND queen.lease_live(c.lease_expires_at),
	CASE WHEN o.oldest IS NULL THEN 0 ELSE greatest(c.next_offset - c.committed, 0) END,
	o.oldest, c.last_consumed_at, c.total_consumed`

func scanCursor(r pgx.CollectableRow) (GroupCursor, error) {
	var c GroupCursor
	err := r.Scan(&c.Group, &c.Queue, &c.Partition, &c.PartitionID, &c.LeaseID, &c.LeaseActive,
		&c.OffsetLag, &c.Oldest, &c.LastConsumedAt, &c.TotalConsumed)
	return c, err
}

// LaggingCursors lists the tenant's cursors whose oldest unconsumed message is
// strictly older than minLag, the most lagging first.
func (d *DB) LaggingCursors(ctx context.Context, tenant string, minLag time.Duration) ([]GroupCursor, error) {
	return collect(ctx, d, tenantCursors("WHERE c.committed < p.next_offset")+`
		SELECT `+cursorColumns+`
		  FROM c
		  `+oldestJoin+`
		 WHERE o.oldest < now() - make_interval(secs => $2)
		 ORDER BY o.oldest, c.consumer_group, c.queue, c.partition`, "list lagging cursors", scanCursor, tenant, minLag.Seconds())
}

// GroupCursors lists one group's cursors on the tenant's queues, by queue, then
// partition.
func (d *DB) GroupCursors(ctx context.Context, tenant, group string) ([]GroupCursor, error) {
	return collect(ctx, d, tenantCursors("WHERE c.consumer_group = $2")+`
		SELECT `+cursorColumns+`
		  FROM c
		  `+oldestJoin+`
		 ORDER BY c.queue, c.partition`, "describe consumer group", scanCursor, tenant, group)
}

// DeleteGroup deletes the group's cursors, with their leases and retry counts, on
// the tenant's queues (on the one queue when queue is not nil), and its
// subscriptions too when metadata is set. It returns the cursors deleted:
// the group starts over on their partitions, which the pops must look at
// again.
func (d *DB) DeleteGroup(ctx context.Context, tenant, group string, queue *string, metadata bool) ([]MovedCursor, error) {
	rows, err := d.q.Query(ctx, `WITH c AS (
			DELETE FROM queen.cursors c USING queen.partitions p, queen.queues q
			 WHERE c.partition_id = p.id AND p.queue_id = q.id AND q.tenant = $1 AND c.consumer_group = $2
			   AND ($3::text IS NULL OR q.name = $3)
			RETURNING q.id, p.id
		), s AS (
			DELETE FROM queen.subscriptions s USING queen.queues q
			 WHERE $4 AND s.queue_id = q.id AND q.tenant = $1 AND s.consumer_group = $2
			   AND ($3::text IS NULL OR q.name = $3)
			RETURNING 1
		)
		SELECT * FROM c`, tenant, group, queue, metadata)
	return collectMoved(rows, err, "delete consumer group %q", group)
}

// MovedCursor is a cursor a seek moved: the pops must look at its partition
// again.
type MovedCursor struct{ Queue, Partition uuid.UUID }

// seekSQL moves cursors by the one seek rule, queen.seek_to_v2: every
// seek releases the leases of the cursors it moves, and says how.
const seekSQL = `SELECT queue_id, partition_id
	  FROM queen.seek_to_v2(p_tenant => $1, p_queue => $2, p_group => $3, p_partition => NULL, p_at => $4)`

// SeekToEnd moves the group's cursors on the tenant's queue just past each
// partition's newest message; a partition without messages is left alone.
// One statement: queen.seek_to_v2 to 'infinity'.
func (d *DB) SeekToEnd(ctx context.Context, tenant, group, queue string) ([]MovedCursor, error) {
	rows, err := d.q.Query(ctx, seekSQL, tenant, queue, group, pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true})
	return collectMoved(rows, err, "seek %q to the end", group)
}

// SeekTo moves the group's cursors on the tenant's queue just after the
// last message created at or before t; queen.seek_to_v2 says how.
func (d *DB) SeekTo(ctx context.Context, tenant, group, queue string, t time.Time) ([]MovedCursor, error) {
	rows, err := d.q.Query(ctx, seekSQL, tenant, queue, group, t)
	return collectMoved(rows, err, "seek %q to a time", group)
}

func collectMoved(rows pgx.Rows, err error, format string, args ...any) ([]MovedCursor, error) {
	if err == nil {
		var out []MovedCursor
		out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[MovedCursor])
		if err == nil {
			return out, nil
		}
	}
	return nil, fmt.Errorf(format+": %w", append(args, err)...)
}

// ErrNoSuchPartition is the partition seek's answer for a queue or partition
// that does not exist, or is another tenant's.
var ErrNoSuchPartition = errors.New("partition not found")

// SeekPartitionToEnd moves the group's cursor on one partition of the
// tenant's queue past its newest message, by queen.seek_to_v2. It reports
// whether a cursor moved and, if so, the creation time of that message (at
// segment granularity). One statement: the partition by
// queues_tenant_name_key and its (queue_id, name) key, its newest segment by
// log_segments_pkey, and the seek. The seek's CTE names a column: on Citus
// it is a result the shards' query reads, which a row of no columns cannot
// be ("a column definition list is required").
func (d *DB) SeekPartitionToEnd(ctx context.Context, tenant, group, queue, partition string) (*MovedCursor, *time.Time, error) {
	var m MovedCursor
	var at *time.Time
	var updated bool
	err := d.q.QueryRow(ctx, `WITH p AS (
			SELECT p.id, p.queue_id,
			       (SELECT s.max_created_at FROM queen.log_segments s
			         WHERE s.partition_id = p.id ORDER BY s.base_offset DESC LIMIT 1) AS newest
			  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
			 WHERE q.tenant = $1 AND q.name = $2 AND p.name = $3
		), u AS MATERIALIZED (
			SELECT partition_id FROM queen.seek_to_v2(p_tenant => $1, p_queue => $2, p_group => $4, p_partition => $3,
			                                          p_at => 'infinity')
		)
		SELECT p.queue_id, p.id, EXISTS (SELECT FROM u), p.newest FROM p`, tenant, queue, partition, group).
		Scan(&m.Queue, &m.Partition, &updated, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, ErrNoSuchPartition
	}
	if err != nil {
		return nil, nil, fmt.Errorf("seek %q on partition %q to the end: %w", group, partition, err)
	}
	if !updated {
		return nil, nil, nil
	}
	return &m, at, nil
}

// SetSubscriptionStart moves the start of every subscription the group has
// on the tenant's queues to just after t, keeping each one's mode; mode all
// has no record and is left alone. Only partitions the group has not reached
// yet notice. It returns the subscriptions changed.
func (d *DB) SetSubscriptionStart(ctx context.Context, tenant, group string, t time.Time) (int, error) {
	tag, err := d.q.Exec(ctx, `UPDATE queen.subscriptions s
		   SET mode = coalesce(s.mode, CASE WHEN s.starts_after = s.created_at THEN 'new' ELSE 'timestamp' END),
		       starts_after = $3
		  FROM queen.queues q
		 WHERE q.id = s.queue_id AND q.tenant = $1 AND s.consumer_group = $2 AND s.starts_after > '-infinity'`,
		tenant, group, t)
	if err != nil {
		return 0, fmt.Errorf("move the subscriptions of %q: %w", group, err)
	}
	return int(tag.RowsAffected()), nil
}
