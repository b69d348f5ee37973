package dbtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// StreamQueryNamed reads a tenant's query called name, and its id. One that
// does not exist reads as the zero StreamQuery and no id.
func (d *DB) StreamQueryNamed(ctx context.Context, tenant, name string) (id string, q StreamQuery, err error) {
	if err := d.pool.QueryRow(ctx, `SELECT id::text FROM queen_streams.queries WHERE tenant = $1 AND name = $2`, tenant, name).
		Scan(&id); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", StreamQuery{}, nil
		}
		return "", StreamQuery{}, fmt.Errorf("find the query %q of tenant %q: %w", name, tenant, err)
	}
	q, err = d.StreamQuery(ctx, id)
	return id, q, err
}

// PutStreamQuery registers a tenant's query behind the operator's back, as
// a registration the operator did not make, and returns its id.
func (d *DB) PutStreamQuery(ctx context.Context, tenant, name, source string) (string, error) {
	var id string
	if err := d.pool.QueryRow(ctx, `INSERT INTO queen_streams.queries (id, tenant, name, source_queue, config_hash)
		VALUES (gen_random_uuid(), $1, $2, $3, 'h') RETURNING id::text`, tenant, name, source).Scan(&id); err != nil {
		return "", fmt.Errorf("register the query %q of tenant %q: %w", name, tenant, err)
	}
	return id, nil
}

// MoveStreamQuery changes a tenant's query's source and sink behind the
// operator's back: drift its resync is to repair.
func (d *DB) MoveStreamQuery(ctx context.Context, tenant, name, source string, sink *string) error {
	tag, err := d.pool.Exec(ctx, `UPDATE queen_streams.queries SET source_queue = $3, sink_queue = $4
		 WHERE tenant = $1 AND name = $2`, tenant, name, source, sink)
	if err == nil && tag.RowsAffected() != 1 {
		err = errors.New("no such query")
	}
	if err != nil {
		return fmt.Errorf("move the query %q of tenant %q: %w", name, tenant, err)
	}
	return nil
}

// PutStateRows records that a query's partition holds n state rows, as the
// cycle's count of them leaves it.
func (d *DB) PutStateRows(ctx context.Context, queryID string, n int64) error {
	if _, err := d.pool.Exec(ctx, `INSERT INTO queen_streams.state_rows (query_id, partition_id, row_count)
		VALUES ($1, gen_random_uuid(), $2)`, queryID, n); err != nil {
		return fmt.Errorf("count %d state rows of query %s: %w", n, queryID, err)
	}
	return nil
}

// Quota is a tenant's quota row, as the operator's TenantQuota leaves it.
type Quota struct {
	Exists     bool
	Enabled    bool
	MaxQueries *int32
	// The limits, nil when unset.
	MaxQueues, PushMessagesPerSecond, PushMessagesBurst, PushBytesPerSecond, PushBytesBurst *int64
	PopMessagesPerSecond, MaxStoredBytes, MaxStateRows                                      *int64
}

// Quota reads a tenant's quota row. One that does not exist reads as the
// zero Quota.
func (d *DB) Quota(ctx context.Context, tenant string) (Quota, error) {
	q := Quota{Exists: true}
	err := d.pool.QueryRow(ctx, `SELECT enabled, max_queries, max_queues::bigint, push_messages_per_second, push_messages_burst,
		       push_bytes_per_second, push_bytes_burst, pop_messages_per_second, max_stored_bytes, max_state_rows
		  FROM queen_streams.quota WHERE tenant = $1`, tenant).
		Scan(&q.Enabled, &q.MaxQueries, &q.MaxQueues, &q.PushMessagesPerSecond, &q.PushMessagesBurst, &q.PushBytesPerSecond,
			&q.PushBytesBurst, &q.PopMessagesPerSecond, &q.MaxStoredBytes, &q.MaxStateRows)
	if errors.Is(err, pgx.ErrNoRows) {
		return Quota{}, nil
	}
	if err != nil {
		return Quota{}, fmt.Errorf("read the quota of tenant %q: %w", tenant, err)
	}
	return q, nil
}

// Now is the database's clock, which the SQL functions' times come from.
func (d *DB) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := d.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read the database's clock: %w", err)
	}
	return now, nil
}

// StreamQueriesByTenant counts the queries called name (of every name, for
// ""), by tenant.
func (d *DB) StreamQueriesByTenant(ctx context.Context, name string) (map[string]int, error) {
	rows, err := d.pool.Query(ctx, `SELECT tenant, count(*)::int FROM queen_streams.queries
		 WHERE $1 = '' OR name = $1 GROUP BY tenant`, name)
	if err != nil {
		return nil, fmt.Errorf("count the queries %q by tenant: %w", name, err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var tenant string
		var n int
		if err := rows.Scan(&tenant, &n); err != nil {
			return nil, fmt.Errorf("count the queries %q by tenant: %w", name, err)
		}
		out[tenant] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count the queries %q by tenant: %w", name, err)
	}
	return out, nil
}

// GroupCommitted sums a consumer group's committed offsets over every
// queue: how many messages it has consumed.
func (d *DB) GroupCommitted(ctx context.Context, group string) (int64, error) {
	var n int64
	if err := d.pool.QueryRow(ctx, `SELECT coalesce(sum(committed), 0)::bigint FROM queen.cursors WHERE consumer_group = $1`, group).
		Scan(&n); err != nil {
		return 0, fmt.Errorf("sum the committed offsets of %s: %w", group, err)
	}
	return n, nil
}

// CountState counts every query's state rows but those keyed except: the
// windows still open, when except is the fold's clock key.
func (d *DB) CountState(ctx context.Context, except string) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM queen_streams.state WHERE key <> $1`, except).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the state rows: %w", err)
	}
	return n, nil
}

// Backend is the process id of the PostgreSQL backend serving the call,
// whose parent is the postmaster.
func (d *DB) Backend(ctx context.Context) (int, error) {
	var pid int
	if err := d.pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return 0, fmt.Errorf("read the backend's pid: %w", err)
	}
	return pid, nil
}

// StateRow is one row of a query's state.
type StateRow struct {
	Partition, Key string
	Value          string // JSON
}

// StateOf lists every state row of a query, of all its partitions, which
// may share keys.
func (d *DB) StateOf(ctx context.Context, queryID string) ([]StateRow, error) {
	rows, err := d.pool.Query(ctx, `SELECT partition_id::text, key, value::text FROM queen_streams.state
		 WHERE query_id = $1 ORDER BY partition_id, key`, queryID)
	if err != nil {
		return nil, fmt.Errorf("read the state of query %s: %w", queryID, err)
	}
	state, err := pgx.CollectRows(rows, pgx.RowToStructByPos[StateRow])
	if err != nil {
		return nil, fmt.Errorf("read the state of query %s: %w", queryID, err)
	}
	return state, nil
}

// Queues lists the names of a tenant's queues.
func (d *DB) Queues(ctx context.Context, tenant string) ([]string, error) {
	rows, err := d.pool.Query(ctx, `SELECT name FROM queen.queues WHERE tenant = $1 ORDER BY name`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list the queues of tenant %q: %w", tenant, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list the queues of tenant %q: %w", tenant, err)
	}
	return names, nil
}

// Metered counts the records the brokers keep of tenants' quota use: none
// until a broker has counted a push against a quota it read.
func (d *DB) Metered(ctx context.Context) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM queen_streams.quota_meter`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the quota meter's records: %w", err)
	}
	return n, nil
}

// LagSample is a consumer group's lag as sampled at a minute.
type LagSample struct {
	Minute     time.Time
	Lag        int64
	LagSeconds float64
}

// LagSamples lists the samples of a group's lag on a tenant's queue, the
// latest first.
func (d *DB) LagSamples(ctx context.Context, tenant, queue, group string) ([]LagSample, error) {
	rows, err := d.pool.Query(ctx, `SELECT minute, lag, lag_seconds FROM queen.group_minutes
		 WHERE tenant = $1 AND queue = $2 AND consumer_group = $3 ORDER BY minute DESC`, tenant, queue, group)
	if err != nil {
		return nil, fmt.Errorf("read the lag samples of %s on %q: %w", group, queue, err)
	}
	samples, err := pgx.CollectRows(rows, pgx.RowToStructByPos[LagSample])
	if err != nil {
		return nil, fmt.Errorf("read the lag samples of %s on %q: %w", group, queue, err)
	}
	return samples, nil
}
