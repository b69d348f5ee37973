// Package dbtest arranges and inspects a broker's database for tests, in
// place of SQL written in the tests themselves: what a test may set up
// (time that has passed, a segment lost) and what it may read (a cursor,
// the rows a queue holds), named and typed, each scoped to one tenant's
// queue so that tests sharing a database see only their own rows. It lives
// beside the seam because it names the tables; a schema change is mended
// here and in broker/pg/db, not in every test package.
//
// Time is moved by moving the rows back: the SQL functions read now() at
// some thirty places and the Go code reads its own clock, so instead of a
// settable clock that every hot statement would have to consult, a test
// ages what it wants aged (a lease, a message, a push) by the duration it
// would otherwise have slept. The rules see exactly what they would see
// that much later, and production pays nothing.
package dbtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/broker/pg/migrate"
)

// DB is a broker's database, seen by a test.
type DB struct{ pool conn }

// conn is what DB reads and writes through: a pool, or a transaction.
type conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error)
}

// New wraps a pool on a migrated database.
func New(pool *pgxpool.Pool) *DB { return &DB{pool: pool} }

// Over sees the database as a transaction does, for a test that inspects
// what a statement wrote before the transaction ends.
func Over(tx pgx.Tx) *DB { return &DB{pool: tx} }

// QueueMode is the consumer group of a pop that names none.
const QueueMode = "__QUEUE_MODE__"

// Cursor is one consumer group's position in one partition.
type Cursor struct {
	Partition      string
	Group          string
	Committed      int64
	BatchEnd       *int64 // where the leased batch ends
	LeaseID        *string
	LeaseExpiresAt *time.Time
	RetryCount     int
	TotalConsumed  int64
}

// Cursors lists the cursors of a tenant's queue, by partition and group.
func (d *DB) Cursors(ctx context.Context, tenant, queue string) ([]Cursor, error) {
	rows, err := d.pool.Query(ctx, `SELECT p.name, c.consumer_group, c.committed, c.batch_end, c.lease_id::text, c.lease_expires_at,
		       c.retry_count, c.total_consumed
		  FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND q.name = $2 ORDER BY p.name, c.consumer_group`, tenant, queue)
	if err != nil {
		return nil, fmt.Errorf("read the cursors of %q: %w", queue, err)
	}
	defer rows.Close()
	var out []Cursor
	for rows.Next() {
		var c Cursor
		if err := rows.Scan(&c.Partition, &c.Group, &c.Committed, &c.BatchEnd, &c.LeaseID, &c.LeaseExpiresAt, &c.RetryCount, &c.TotalConsumed); err != nil {
			return nil, fmt.Errorf("read a cursor of %q: %w", queue, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the cursors of %q: %w", queue, err)
	}
	return out, nil
}

// Queue is what a tenant's queue holds, as stored.
type Queue struct {
	Exists        bool
	ID            string
	LeaseTime     int
	RetryLimit    int
	Priority      int
	DedupWindow   *int // seconds; nil: the broker's --dedup-window
	Storage       string
	Partitions    map[string]string // id by name
	Segments      int
	Frames        int   // messages stored
	NextOffset    int64 // the sum over the partitions: offsets handed out
	Floor         int64 // the sum over the partitions: offsets below it are gone
	StoredBytes   int64 // the sum of the partitions' stored_bytes counters
	DeadLetters   int
	Dedup         int // push_dedup records
	Subscriptions int
	Committed     int64 // the sum of its cursors' committed offsets
}

// Queue reads a tenant's queue. A queue that does not exist reads as the
// zero Queue.
func (d *DB) Queue(ctx context.Context, tenant, queue string) (Queue, error) {
	var out Queue
	var names, ids []string
	err := d.pool.QueryRow(ctx, `SELECT true, q.id::text, q.lease_time, q.retry_limit, q.priority, q.dedup_window_seconds, q.storage
		  FROM queen.queues q WHERE q.tenant = $1 AND q.name = $2`, tenant, queue).
		Scan(&out.Exists, &out.ID, &out.LeaseTime, &out.RetryLimit, &out.Priority, &out.DedupWindow, &out.Storage)
	if err == nil {
		// The counts by the queue's id, each sub-select on its own: on Citus
		// the partitions' tables are distributed, and no sub-select over
		// them may refer to a row of the catalog's.
		err = d.pool.QueryRow(ctx, `SELECT
		       coalesce((SELECT array_agg(p.name ORDER BY p.name) FROM queen.partitions p WHERE p.queue_id = $1), '{}'),
		       coalesce((SELECT array_agg(p.id::text ORDER BY p.name) FROM queen.partitions p WHERE p.queue_id = $1), '{}'),
		       (SELECT count(*) FROM queen.log_segments s JOIN queen.partitions p ON p.id = s.partition_id WHERE p.queue_id = $1),
		       (SELECT coalesce(sum(s.frame_count), 0) FROM queen.log_segments s JOIN queen.partitions p ON p.id = s.partition_id WHERE p.queue_id = $1),
		       (SELECT coalesce(sum(p.next_offset), 0) FROM queen.partitions p WHERE p.queue_id = $1),
		       (SELECT coalesce(sum(p.floor_offset), 0) FROM queen.partitions p WHERE p.queue_id = $1),
		       (SELECT coalesce(sum(p.stored_bytes), 0) FROM queen.partitions p WHERE p.queue_id = $1),
		       (SELECT count(*) FROM queen.dead_letters l JOIN queen.partitions p ON p.id = l.partition_id WHERE p.queue_id = $1),
		       (SELECT count(*) FROM queen.push_dedup x JOIN queen.partitions p ON p.id = x.partition_id WHERE p.queue_id = $1),
		       (SELECT count(*) FROM queen.subscriptions s WHERE s.queue_id = $1),
		       (SELECT coalesce(sum(c.committed), 0) FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id WHERE p.queue_id = $1)`,
			out.ID).
			Scan(&names, &ids, &out.Segments, &out.Frames, &out.NextOffset, &out.Floor, &out.StoredBytes, &out.DeadLetters,
				&out.Dedup, &out.Subscriptions, &out.Committed)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Queue{}, nil
	}
	if err != nil {
		return Queue{}, fmt.Errorf("read queue %q: %w", queue, err)
	}
	out.Partitions = map[string]string{}
	for i, name := range names {
		out.Partitions[name] = ids[i]
	}
	return out, nil
}

// ExpireLeases ends every lease on a tenant's queue, as if its lease time
// had passed: each expiry moves to a second ago. What reads the database
// sees it at once (an ack, an extension, a pop of the partition route); a
// broker's hot list still waits for the lease's end by its own timer, so
// a queue-wide pop finds the partition only then.
func (d *DB) ExpireLeases(ctx context.Context, tenant, queue string) error {
	_, err := d.pool.Exec(ctx, `UPDATE queen.cursors c SET lease_expires_at = now() - interval '1 second'
		  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE p.id = c.partition_id AND q.tenant = $1 AND q.name = $2 AND c.lease_expires_at IS NOT NULL`, tenant, queue)
	if err != nil {
		return fmt.Errorf("expire the leases of %q: %w", queue, err)
	}
	return nil
}

// Age moves everything timed of a tenant's queue back by d, as if d had
// passed since it happened: its messages' creation (in the stored frames as
// in the segments' bounds), its partitions' last push, its cursors' leases
// and last consumption, its dedup records, its subscriptions, and its
// analytics minutes (by whole minutes only: they are buckets).
func (d *DB) Age(ctx context.Context, tenant, queue string, by time.Duration) error {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("age queue %q: %w", queue, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op once committed
	rows, err := tx.Query(ctx, `SELECT s.partition_id, s.base_offset, s.body, s.checksum, s.frame_count,
		       s.min_created_at - $3::interval, s.max_created_at - $3::interval
		  FROM queen.log_segments s JOIN queen.partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND q.name = $2`, tenant, queue, by)
	if err != nil {
		return fmt.Errorf("age queue %q: read its segments: %w", queue, err)
	}
	type seg struct {
		partition uuid.UUID
		base      int64
		body      []byte
		sum       uint64
		min, max  time.Time
	}
	var segs []seg
	for rows.Next() {
		var s seg
		var sum int64
		var n int
		var body []byte
		if err := rows.Scan(&s.partition, &s.base, &body, &sum, &n, &s.min, &s.max); err != nil {
			return fmt.Errorf("age queue %q: read a segment: %w", queue, err)
		}
		frames, err := segment.Decode(body, uint64(sum), n)
		if err != nil {
			return fmt.Errorf("age queue %q: %w", queue, err)
		}
		for i := range frames {
			frames[i].CreatedAt -= by.Microseconds()
		}
		s.body, s.sum = segment.Encode(nil, frames)
		segs = append(segs, s)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("age queue %q: read its segments: %w", queue, err)
	}
	for _, s := range segs {
		if _, err := tx.Exec(ctx, `UPDATE queen.log_segments SET body = $3, checksum = $4, min_created_at = $5, max_created_at = $6
			 WHERE partition_id = $1 AND base_offset = $2`, s.partition, s.base, s.body, int64(s.sum), s.min, s.max); err != nil {
			return fmt.Errorf("age queue %q: write a segment: %w", queue, err)
		}
	}
	// Each row moved on its own: a select gives its key and its new times
	// (as text, which keeps -infinity), and an UPDATE by its key alone sets
	// them. On Citus an UPDATE may neither do time arithmetic on a row's
	// columns (its zone makes it STABLE) nor join across shards.
	for _, t := range []struct{ sel, upd string }{
		{`SELECT x.partition_id::text, x.consumer_group, (x.lease_expires_at - $3::interval)::text,
		         (x.last_consumed_at - $3::interval)::text
		    FROM queen.cursors x JOIN queen.partitions p ON p.id = x.partition_id JOIN queen.queues q ON q.id = p.queue_id
		   WHERE q.tenant = $1 AND q.name = $2`,
			`UPDATE queen.cursors SET lease_expires_at = $3::timestamptz, last_consumed_at = $4::timestamptz
			  WHERE partition_id = $1::uuid AND consumer_group = $2`},
		{`SELECT x.partition_id::text, x.transaction_id, (x.created_at - $3::interval)::text
		    FROM queen.push_dedup x JOIN queen.partitions p ON p.id = x.partition_id JOIN queen.queues q ON q.id = p.queue_id
		   WHERE q.tenant = $1 AND q.name = $2`,
			`UPDATE queen.push_dedup SET created_at = $3::timestamptz WHERE partition_id = $1::uuid AND transaction_id = $2`},
		{`SELECT x.queue_id::text, x.consumer_group, (x.created_at - $3::interval)::text, (x.starts_after - $3::interval)::text
		    FROM queen.subscriptions x JOIN queen.queues q ON q.id = x.queue_id WHERE q.tenant = $1 AND q.name = $2`,
			`UPDATE queen.subscriptions SET created_at = $3::timestamptz, starts_after = $4::timestamptz
			  WHERE queue_id = $1::uuid AND consumer_group = $2`},
		{`SELECT x.tenant, x.queue, x.replica, x.minute::text, (x.minute - date_trunc('minute', $3::interval))::text
		    FROM queen.queue_minutes x WHERE x.tenant = $1 AND x.queue = $2`,
			`UPDATE queen.queue_minutes SET minute = $5::timestamptz
			  WHERE tenant = $1 AND queue = $2 AND replica = $3 AND minute = $4::timestamptz`},
		{`SELECT x.id::text, (x.last_push_at - $3::interval)::text, (x.created_at - $3::interval)::text
		    FROM queen.partitions x JOIN queen.queues q ON q.id = x.queue_id WHERE q.tenant = $1 AND q.name = $2`,
			`UPDATE queen.partitions SET last_push_at = $2::timestamptz, created_at = $3::timestamptz WHERE id = $1::uuid`},
	} {
		rows, err := tx.Query(ctx, t.sel, tenant, queue, by)
		if err != nil {
			return fmt.Errorf("age queue %q by %s: %w", queue, by, err)
		}
		moved, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
		if err != nil {
			return fmt.Errorf("age queue %q by %s: %w", queue, by, err)
		}
		for _, args := range moved {
			if _, err := tx.Exec(ctx, t.upd, args...); err != nil {
				return fmt.Errorf("age queue %q by %s: %w", queue, by, err)
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("age queue %q: %w", queue, err)
	}
	return nil
}

// Leftovers counts, table by table, the rows that still refer to a queue
// or to one of its partitions: for a test that deleted the queue and
// requires nothing of it left behind.
func (d *DB) Leftovers(ctx context.Context, queueID, partitionID string) (map[string]int, error) {
	var n [7]int
	err := d.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM queen.queues WHERE id = $1),
		       (SELECT count(*) FROM queen.subscriptions WHERE queue_id = $1),
		       (SELECT count(*) FROM queen.partitions WHERE id = $2),
		       (SELECT count(*) FROM queen.log_segments WHERE partition_id = $2),
		       (SELECT count(*) FROM queen.cursors WHERE partition_id = $2),
		       (SELECT count(*) FROM queen.push_dedup WHERE partition_id = $2),
		       (SELECT count(*) FROM queen.dead_letters WHERE partition_id = $2)`, queueID, partitionID).
		Scan(&n[0], &n[1], &n[2], &n[3], &n[4], &n[5], &n[6])
	if err != nil {
		return nil, fmt.Errorf("count the rows of queue %s: %w", queueID, err)
	}
	out := map[string]int{}
	for i, table := range []string{"queues", "subscriptions", "partitions", "log_segments", "cursors", "push_dedup", "dead_letters"} {
		if n[i] > 0 {
			out[table] = n[i]
		}
	}
	return out, nil
}

// Quiet makes a partition's last push lie ago before now (after it, for a
// negative ago), as its window buffer reads it.
func (d *DB) Quiet(ctx context.Context, tenant, queue, partition string, ago time.Duration) error {
	_, err := d.pool.Exec(ctx, `UPDATE queen.partitions p SET last_push_at = now() - $4::interval
		  FROM queen.queues q WHERE q.id = p.queue_id AND q.tenant = $1 AND q.name = $2 AND p.name = $3`, tenant, queue, partition, ago)
	if err != nil {
		return fmt.Errorf("quiet partition %s of %q: %w", partition, queue, err)
	}
	return nil
}

// AddPartitions adds n empty partitions, idle-1 to idle-n, to a tenant's
// queue, which must exist: a queue as wide as a long-lived one.
func (d *DB) AddPartitions(ctx context.Context, tenant, queue string, n int) error {
	tag, err := d.pool.Exec(ctx, `INSERT INTO queen.partitions (id, queue_id, name)
		SELECT gen_random_uuid(), q.id, 'idle-' || i FROM queen.queues q, generate_series(1, $3) i
		 WHERE q.tenant = $1 AND q.name = $2`, tenant, queue, n)
	if err != nil {
		return fmt.Errorf("add %d partitions to %q: %w", n, queue, err)
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("add %d partitions to %q: added %d", n, queue, tag.RowsAffected())
	}
	return nil
}

// DropSegment deletes the segment of a tenant's queue that starts at
// offset base, in every partition, as retention would.
func (d *DB) DropSegment(ctx context.Context, tenant, queue string, base int64) error {
	tag, err := d.pool.Exec(ctx, `DELETE FROM queen.log_segments s USING queen.partitions p, queen.queues q
		 WHERE p.id = s.partition_id AND q.id = p.queue_id AND q.tenant = $1 AND q.name = $2 AND s.base_offset = $3`,
		tenant, queue, base)
	if err != nil {
		return fmt.Errorf("drop the segment at %d of %q: %w", base, queue, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("drop the segment at %d of %q: there is none", base, queue)
	}
	return nil
}

// SegmentSizes lists the stored size in bytes of each segment of a
// tenant's queue, by partition and offset.
func (d *DB) SegmentSizes(ctx context.Context, tenant, queue string) ([]int64, error) {
	rows, err := d.pool.Query(ctx, `SELECT octet_length(s.body)::bigint FROM queen.log_segments s
		  JOIN queen.partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND q.name = $2 ORDER BY p.name, s.base_offset`, tenant, queue)
	if err != nil {
		return nil, fmt.Errorf("read the segment sizes of %q: %w", queue, err)
	}
	sizes, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("read the segment sizes of %q: %w", queue, err)
	}
	return sizes, nil
}

// LockPartitions holds the rows of a tenant's queue's partitions, as a slow
// push would, until release: whoever writes to them meanwhile waits.
func (d *DB) LockPartitions(ctx context.Context, tenant, queue string) (release func() error, err error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock the partitions of %q: %w", queue, err)
	}
	// One statement a partition: on Citus no statement locks rows of
	// several shards.
	rows, err := tx.Query(ctx, `SELECT p.id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND q.name = $2 ORDER BY p.id`, tenant, queue)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	for _, id := range ids {
		if err != nil {
			break
		}
		_, err = tx.Exec(ctx, `SELECT FROM queen.partitions WHERE id = $1 FOR UPDATE`, id)
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("lock the partitions of %q: %w", queue, err)
	}
	return func() error { return tx.Rollback(context.WithoutCancel(ctx)) }, nil
}

// LockWaiters counts the backends waiting for a lock.
func (d *DB) LockWaiters(ctx context.Context) (int, error) {
	n, err := d.countOnEveryNode(ctx, `SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted`)
	if err != nil {
		return 0, fmt.Errorf("count the backends waiting for a lock: %w", err)
	}
	return n, nil
}

// countOnEveryNode runs a count of the server's own state, such as
// pg_locks, and sums it over every node: on Citus a row's lock, and a
// lock taken in a statement on it, is the lock of the node that holds its
// shard.
func (d *DB) countOnEveryNode(ctx context.Context, count string) (int, error) {
	citus, err := migrate.OnCitus(ctx, d.pool)
	if err != nil {
		return 0, err
	}
	if citus {
		count = `SELECT coalesce(sum(result::int), 0) FROM run_command_on_all_nodes($$` + count + `$$)`
	}
	var n int
	err = d.pool.QueryRow(ctx, count).Scan(&n)
	return n, err
}

// RaiseFloor moves the floor of every partition of a tenant's queue to
// offset, as retention deleting what lies below it would.
func (d *DB) RaiseFloor(ctx context.Context, tenant, queue string, offset int64) error {
	_, err := d.pool.Exec(ctx, `UPDATE queen.partitions p SET floor_offset = $3
		  FROM queen.queues q WHERE q.id = p.queue_id AND q.tenant = $1 AND q.name = $2`, tenant, queue, offset)
	if err != nil {
		return fmt.Errorf("raise the floor of %q to %d: %w", queue, offset, err)
	}
	return nil
}

// ReplicaSamples counts the samples the replicas took of themselves.
func (d *DB) ReplicaSamples(ctx context.Context) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM queen.replica_samples`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the replica samples: %w", err)
	}
	return n, nil
}

// AgeReplica moves a replica's samples back by d, as if it had stopped
// sampling d ago; every replica's, for the empty name.
func (d *DB) AgeReplica(ctx context.Context, replica string, by time.Duration) error {
	_, err := d.pool.Exec(ctx, `UPDATE queen.replica_samples SET minute = minute - $2::interval, sampled_at = sampled_at - $2::interval
		 WHERE $1 = '' OR replica = $1`, replica, by)
	if err != nil {
		return fmt.Errorf("age the samples of replica %q: %w", replica, err)
	}
	return nil
}

// ForgetReplicas deletes every replica's samples, as if none had sampled
// itself yet.
func (d *DB) ForgetReplicas(ctx context.Context) error {
	if _, err := d.pool.Exec(ctx, `DELETE FROM queen.replica_samples`); err != nil {
		return fmt.Errorf("delete the replica samples: %w", err)
	}
	return nil
}

// SetRetries sets the retry count of a group's cursor on a partition of a
// tenant's queue, as that many failed batches would have.
func (d *DB) SetRetries(ctx context.Context, tenant, queue, partition, group string, n int) error {
	return d.setCursor(ctx, "retry_count", "the retries", tenant, queue, partition, group, n)
}

// setCursor sets one column of a group's cursor on a partition of a
// tenant's queue to n; what names the column in an error.
func (d *DB) setCursor(ctx context.Context, column, what, tenant, queue, partition, group string, n any) error {
	tag, err := d.pool.Exec(ctx, `UPDATE queen.cursors c SET `+column+` = $5
		  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE p.id = c.partition_id AND q.tenant = $1 AND q.name = $2 AND p.name = $3 AND c.consumer_group = $4`,
		tenant, queue, partition, group, n)
	if err != nil {
		return fmt.Errorf("set %s of %s on %q/%s: %w", what, group, queue, partition, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("set %s of %s on %q/%s: no such cursor", what, group, queue, partition)
	}
	return nil
}

// EmptyPartition deletes every segment of a partition of a tenant's queue,
// as retention taking all its messages would.
func (d *DB) EmptyPartition(ctx context.Context, tenant, queue, partition string) error {
	_, err := d.pool.Exec(ctx, `DELETE FROM queen.log_segments s USING queen.partitions p, queen.queues q
		 WHERE p.id = s.partition_id AND q.id = p.queue_id AND q.tenant = $1 AND q.name = $2 AND p.name = $3`,
		tenant, queue, partition)
	if err != nil {
		return fmt.Errorf("empty partition %s of %q: %w", partition, queue, err)
	}
	return nil
}

// Shard is the Citus shard that holds a partition of a tenant's queue, and
// 0 on PostgreSQL, whose one node holds them all.
func (d *DB) Shard(ctx context.Context, tenant, queue, partition string) (int64, error) {
	var shard int64
	if citus, err := migrate.OnCitus(ctx, d.pool); err != nil || !citus {
		return 0, err
	}
	err := d.pool.QueryRow(ctx, `SELECT get_shard_id_for_distribution_column('queen.partitions', p.id)
		  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND q.name = $2 AND p.name = $3`, tenant, queue, partition).Scan(&shard)
	if err != nil {
		return 0, fmt.Errorf("find the shard of partition %q of %q: %w", partition, queue, err)
	}
	return shard, nil
}
