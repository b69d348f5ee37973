package dbtest

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Swept is what a sweep recorded of one partition of a queue.
type Swept struct {
	Partition string
	Kind      string
	Messages  int64
}

// RetentionEvents lists the events the sweeps recorded for a tenant's
// queue, by partition name.
func (d *DB) RetentionEvents(ctx context.Context, tenant, queue string) ([]Swept, error) {
	rows, err := d.pool.Query(ctx, `SELECT p.name, e.kind, e.messages FROM queen.retention_events e
		  JOIN queen.partitions p ON p.id = e.partition_id
		 WHERE e.tenant = $1 AND e.queue = $2 ORDER BY p.name, e.at`, tenant, queue)
	if err != nil {
		return nil, fmt.Errorf("read the retention events of %q: %w", queue, err)
	}
	events, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Swept])
	if err != nil {
		return nil, fmt.Errorf("read the retention events of %q: %w", queue, err)
	}
	return events, nil
}

// AddOrphanDedup adds n push dedup records of no partition, created now:
// the dedup table as a busy broker grows it between two vacuums.
func (d *DB) AddOrphanDedup(ctx context.Context, n int) error {
	if _, err := d.pool.Exec(ctx, `INSERT INTO queen.push_dedup (partition_id, transaction_id, message_id)
		SELECT gen_random_uuid(), 't' || g, gen_random_uuid() FROM generate_series(1, $1) g`, n); err != nil {
		return fmt.Errorf("add %d dedup records: %w", n, err)
	}
	return nil
}

// UnsummarizedDedup counts the block ranges of the dedup table's BRIN index
// that were not summarized, summarizing them.
func (d *DB) UnsummarizedDedup(ctx context.Context) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, `SELECT brin_summarize_new_values('queen.push_dedup_created_brin')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("summarize the dedup index: %w", err)
	}
	return n, nil
}

// minuteTables are the tables that the metrics retention trims, with the
// column naming whose rows they are.
var minuteTables = []struct{ table, owner string }{{"queen.queue_minutes", "tenant"}, {"queen_streams.query_minutes", "tenant"},
	{"queen.group_minutes", "tenant"}, {"queen.replica_samples", "replica"}, {"queen.retention_events", "tenant"}}

// PutMinutes writes one row at the time at into each table the metrics
// retention trims: a queue's, a query's and a group's minute and a
// retention event of tenant, and a sample of a replica named tenant.
func (d *DB) PutMinutes(ctx context.Context, tenant string, at time.Time) error {
	minute := at.Truncate(time.Minute)
	if err := d.PutQueueMinutes(ctx, QueueMinute{Tenant: tenant, Queue: "q", Replica: "r", Minute: minute}); err != nil {
		return err
	}
	if err := d.PutQueryMinute(ctx, QueryMinute{Tenant: tenant, QueryID: uuid.NewString(), Replica: "r", Minute: minute}); err != nil {
		return err
	}
	if err := d.PutGroupMinute(ctx, GroupMinute{Tenant: tenant, Queue: "q", Group: "g", Minute: minute, Lag: 1, LagSeconds: 1}); err != nil {
		return err
	}
	if err := d.PutRetentionEvent(ctx, RetentionEvent{Tenant: tenant, Queue: "q", Kind: "retention", At: at, Messages: 1}); err != nil {
		return err
	}
	_, err := d.pool.Exec(ctx, `INSERT INTO queen.replica_samples (replica, minute, sampled_at, cpu_user_pct, cpu_sys_pct,
		rss_bytes, virtual_bytes, pool_size, pool_idle, pool_active) VALUES ($1, $2, $3, 0, 0, 0, 0, 0, 0, 0)`, tenant, minute, at)
	if err != nil {
		return fmt.Errorf("put a sample of replica %q at %s: %w", tenant, at, err)
	}
	return nil
}

// Minutes counts the rows of tenant (of a replica named tenant) in each
// table the metrics retention trims, by table.
func (d *DB) Minutes(ctx context.Context, tenant string) (map[string]int, error) {
	out := map[string]int{}
	for _, m := range minuteTables {
		var n int
		if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM `+m.table+` WHERE `+m.owner+` = $1`, tenant).Scan(&n); err != nil {
			return nil, fmt.Errorf("count the rows of %q in %s: %w", tenant, m.table, err)
		}
		out[m.table] = n
	}
	return out, nil
}

// AtRest gives each partition of a tenant's queue that has no offset yet
// one young one-message segment, consumed by group: a wide queue at rest,
// with nothing for a sweep to take. It then analyzes the tables, as
// autovacuum would have done by then.
func (d *DB) AtRest(ctx context.Context, tenant, queue, group string) error {
	_, err := d.pool.Exec(ctx, `WITH p AS (UPDATE queen.partitions p SET next_offset = 1, last_push_at = now()
		  FROM queen.queues q WHERE q.id = p.queue_id AND q.tenant = $1 AND q.name = $2 AND p.next_offset = 0 RETURNING p.id),
		s AS (INSERT INTO queen.log_segments (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
		      SELECT id, 0, 1, '\x00', 0, ARRAY['t'], now(), now() FROM p)
		INSERT INTO queen.cursors (partition_id, consumer_group, committed, last_consumed_at) SELECT id, $3, 1, now() FROM p`,
		tenant, queue, group)
	if err != nil {
		return fmt.Errorf("put queue %q at rest: %w", queue, err)
	}
	if _, err := d.pool.Exec(ctx, `ANALYZE queen.partitions, queen.log_segments, queen.cursors`); err != nil {
		return fmt.Errorf("put queue %q at rest: analyze: %w", queue, err)
	}
	return nil
}

// SetFlagQuietly turns a system flag on or off behind the brokers' backs:
// no notification, so only a replica's periodic re-read finds it.
func (d *DB) SetFlagQuietly(ctx context.Context, name string, enabled bool) error {
	if _, err := d.pool.Exec(ctx, `INSERT INTO queen.system_flags (name, enabled) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET enabled = $2`, name, enabled); err != nil {
		return fmt.Errorf("set flag %s quietly: %w", name, err)
	}
	return nil
}

// Running counts the other backends on this database running a statement
// whose text contains any of words, case aside: what runs side by side.
func (d *DB) Running(ctx context.Context, words ...string) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		   AND pid <> pg_backend_pid() AND state = 'active'
		   AND query ILIKE ANY (SELECT '%' || w || '%' FROM unnest($1::text[]) w)`, words).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the statements running: %w", err)
	}
	return n, nil
}

// Listeners counts the connections, to any database of the cluster, that
// LISTEN on channel, its name quoted as the brokers send it.
func (d *DB) Listeners(ctx context.Context, channel string) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN "' || $1 || '"'`, channel).
		Scan(&n); err != nil {
		return 0, fmt.Errorf("count the listeners on %s: %w", channel, err)
	}
	return n, nil
}
