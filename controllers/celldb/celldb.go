// Package celldb is the operator's access to the cell database, the
// PostgreSQL the brokers share: the quota grants it writes, the
// registrations it deletes, and the progress it reads. Registration itself
// goes through the broker (package registration), never through here.
package celldb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is the cell database.
type DB struct{ pool *pgxpool.Pool }

// New wraps a pool; the caller keeps ownership of it.
func New(pool *pgxpool.Pool) *DB { return &DB{pool: pool} }

// Quota is a tenant's grant.
type Quota struct {
	Tenant     string
	Enabled    bool
	MaxQueries *int32 // nil: no cap
}

// ApplyQuota writes the grant row, leaving it untouched when it already
// says the same, and returns how many queries the tenant has registered.
func (d *DB) ApplyQuota(ctx context.Context, q Quota) (registered int64, err error) {
	err = d.pool.QueryRow(ctx, `
WITH up AS (
    INSERT INTO queen_streams.quota AS g (tenant, enabled, max_queries)
    VALUES ($1, $2, $3)
    ON CONFLICT (tenant) DO UPDATE
       SET enabled = EXCLUDED.enabled, max_queries = EXCLUDED.max_queries, updated_at = now()
     WHERE (g.enabled, g.max_queries) IS DISTINCT FROM (EXCLUDED.enabled, EXCLUDED.max_queries)
)
SELECT count(*) FROM queen_streams.queries WHERE tenant = $1`, q.Tenant, q.Enabled, q.MaxQueries).Scan(&registered)
	if err != nil {
		return 0, fmt.Errorf("apply quota of tenant %q: %w", q.Tenant, err)
	}
	return registered, nil
}

// CountQueries returns how many queries the tenant has registered.
func (d *DB) CountQueries(ctx context.Context, tenant string) (int64, error) {
	var n int64
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM queen_streams.queries WHERE tenant = $1`, tenant).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queries of tenant %q: %w", tenant, err)
	}
	return n, nil
}

// DeleteQuota removes the tenant's grant: the broker then refuses new names
// for the tenant, and its existing queries keep running.
func (d *DB) DeleteQuota(ctx context.Context, tenant string) error {
	if _, err := d.pool.Exec(ctx, `DELETE FROM queen_streams.quota WHERE tenant = $1`, tenant); err != nil {
		return fmt.Errorf("delete quota of tenant %q: %w", tenant, err)
	}
	return nil
}

// DeleteQuery removes the registration and, by cascade, its state. It
// reports whether there was one.
func (d *DB) DeleteQuery(ctx context.Context, tenant, name string) (bool, error) {
	tag, err := d.pool.Exec(ctx, `DELETE FROM queen_streams.queries WHERE tenant = $1 AND name = $2`, tenant, name)
	if err != nil {
		return false, fmt.Errorf("delete query %q of tenant %q: %w", name, tenant, err)
	}
	return tag.RowsAffected() > 0, nil
}

// Progress is what a query has done, read from the database.
type Progress struct {
	// Lag is the messages of the source queue not yet consumed by the
	// query's consumer group: next_offset minus committed, per partition.
	// Offsets removed by retention still count, so it can overstate.
	Lag int64
	// StateRows counts the query's state rows.
	StateRows int64
	// LastCycle is the later of the newest state write and the group's
	// last ack; nil when the query has done neither.
	LastCycle *time.Time
}

// ErrNoQuery is returned when the tenant has no query of that name.
var ErrNoQuery = errors.New("no such query")

// Progress reads the progress of the tenant's query name, whose workers pop
// source as consumer group group.
func (d *DB) Progress(ctx context.Context, tenant, name, group, source string) (Progress, error) {
	var p Progress
	err := d.pool.QueryRow(ctx, `
SELECT src.lag, st.n, GREATEST(st.last, src.last)
  FROM queen_streams.queries q
 CROSS JOIN LATERAL (
        SELECT count(*) AS n, max(s.updated_at) AS last
          FROM queen_streams.state s
         WHERE s.query_id = q.id AND s.partition_id <> $5) st
 CROSS JOIN LATERAL (
        SELECT COALESCE(sum(GREATEST(p.next_offset - COALESCE(c.committed, 0), 0)), 0)::bigint AS lag,
               max(c.last_consumed_at) AS last
          FROM queen.queues qu
          JOIN queen.partitions p ON p.queue_id = qu.id
          LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = $3
         WHERE qu.tenant = $1 AND qu.name = $4) src
 WHERE q.tenant = $1 AND q.name = $2`, tenant, name, group, source, fencePartition).Scan(&p.Lag, &p.StateRows, &p.LastCycle)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("progress of query %q of tenant %q: %w", name, tenant, ErrNoQuery)
	}
	if err != nil {
		return p, fmt.Errorf("progress of query %q of tenant %q: %w", name, tenant, err)
	}
	return p, nil
}
