// Package celldb is the operator's access to the cell database, the
// PostgreSQL the brokers share: the quota grants it writes, the
// registrations it deletes, suspends, rewinds and restores, and the
// progress and load it reads. Registration itself goes through the broker
// (package controllers/registration), never through here.
//
// Every call goes through a function the schema owns (see
// broker/pg/migrate/functions/queen_streams.quota_*.sql, query_*.sql and
// savepoint_*.sql), never through the broker's tables, so that a table
// change cannot break the operator silently; TestOnlyTheSeamNamesTables
// holds it to that. It is a package of its own, beside broker/pg/db, so that
// the operator links none of the broker's internals: only pgx.
package celldb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is the operator's access to the cell database.
type DB struct{ pool *pgxpool.Pool }

// New wraps a pool; the caller keeps ownership of it.
func New(pool *pgxpool.Pool) *DB { return &DB{pool: pool} }

// Open connects a pool of at most maxConns connections to the cell
// database at url. Close releases it.
func Open(ctx context.Context, url string, maxConns int32) (*DB, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	pc.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return New(pool), nil
}

// Close closes the pool, waiting for its connections to be released.
func (d *DB) Close() { d.pool.Close() }

// Ping checks that the cell database answers.
func (d *DB) Ping(ctx context.Context) error { return d.pool.Ping(ctx) }

// Quota is a tenant's grant and its limits; nil means no limit.
type Quota struct {
	Tenant     string
	Enabled    bool
	MaxQueries *int32
	MaxQueues  *int32
	// The push rates and their bursts (nil burst: the rate), and the pop
	// rate, per second.
	PushMessagesPerSecond, PushMessagesBurst *int64
	PushBytesPerSecond, PushBytesBurst       *int64
	PopMessagesPerSecond                     *int64
	MaxStoredBytes                           *int64
	MaxStateRows                             *int64
}

// ApplyQuota writes the grant, leaving it untouched when it already says
// the same, and returns how many queries the tenant has registered.
func (d *DB) ApplyQuota(ctx context.Context, q Quota) (registered int64, err error) {
	err = d.pool.QueryRow(ctx, `SELECT queen_streams.quota_apply_v2(p_tenant => $1, p_enabled => $2,
		p_max_queries => $3, p_max_queues => $4, p_push_messages_per_second => $5, p_push_messages_burst => $6,
		p_push_bytes_per_second => $7, p_push_bytes_burst => $8, p_pop_messages_per_second => $9,
		p_max_stored_bytes => $10, p_max_state_rows => $11)`,
		q.Tenant, q.Enabled, q.MaxQueries, q.MaxQueues, q.PushMessagesPerSecond, q.PushMessagesBurst,
		q.PushBytesPerSecond, q.PushBytesBurst, q.PopMessagesPerSecond, q.MaxStoredBytes, q.MaxStateRows).Scan(&registered)
	if err != nil {
		return 0, fmt.Errorf("apply quota of tenant %q: %w", q.Tenant, err)
	}
	return registered, nil
}

// Usage is what a tenant uses, from the counters the brokers keep.
type Usage struct {
	Queues, Queries, StoredBytes, StateRows int64
	// PushedLastMinute and PoppedLastMinute are messages.
	PushedLastMinute, PoppedLastMinute int64
	// Refusing lists the limits (TenantQuota spec fields) that refused the
	// tenant within the window asked for, sorted.
	Refusing []string
}

// Usage reads the tenant's usage, and the limits that refused it within
// the last within.
func (d *DB) Usage(ctx context.Context, tenant string, within time.Duration) (Usage, error) {
	var u Usage
	err := d.pool.QueryRow(ctx, `SELECT queues, queries, stored_bytes, state_rows, pushed_last_minute,
		popped_last_minute, refusing FROM queen_streams.quota_usage(p_tenant => $1, p_within => $2)`, tenant, within).
		Scan(&u.Queues, &u.Queries, &u.StoredBytes, &u.StateRows, &u.PushedLastMinute, &u.PoppedLastMinute, &u.Refusing)
	if err != nil {
		return u, fmt.Errorf("read usage of tenant %q: %w", tenant, err)
	}
	return u, nil
}

// CountQueries returns how many queries the tenant has registered.
func (d *DB) CountQueries(ctx context.Context, tenant string) (int64, error) {
	var n int64
	if err := d.pool.QueryRow(ctx, `SELECT queen_streams.query_count(p_tenant => $1)`, tenant).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queries of tenant %q: %w", tenant, err)
	}
	return n, nil
}

// DeleteQuota removes the tenant's grant: the broker then refuses new names
// for the tenant, and its existing queries keep running.
func (d *DB) DeleteQuota(ctx context.Context, tenant string) error {
	if _, err := d.pool.Exec(ctx, `SELECT queen_streams.quota_delete(p_tenant => $1)`, tenant); err != nil {
		return fmt.Errorf("delete quota of tenant %q: %w", tenant, err)
	}
	return nil
}

// DeleteQuery removes the registration and, by cascade, its state. It
// reports whether there was one.
func (d *DB) DeleteQuery(ctx context.Context, tenant, name string) (bool, error) {
	var found bool
	if err := d.pool.QueryRow(ctx, `SELECT queen_streams.query_delete(p_tenant => $1, p_name => $2)`, tenant, name).Scan(&found); err != nil {
		return false, fmt.Errorf("delete query %q of tenant %q: %w", name, tenant, err)
	}
	return found, nil
}

// Progress is what a query has done, read from the database.
type Progress struct {
	// Lag is the messages of the source queue not yet consumed by the
	// query's consumer group: next_offset minus committed, per partition.
	// Offsets removed by retention still count, so it can overstate.
	Lag int64
	// Oldest is the creation time of the oldest of those messages, at
	// segment granularity; nil when there is none.
	Oldest *time.Time
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
SELECT lag, oldest, state_rows, last_cycle
  FROM queen_streams.query_progress_v2(p_tenant => $1, p_name => $2, p_group => $3, p_source => $4)`,
		tenant, name, group, source).Scan(&p.Lag, &p.Oldest, &p.StateRows, &p.LastCycle)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("progress of query %q of tenant %q: %w", name, tenant, ErrNoQuery)
	}
	if err != nil {
		return p, fmt.Errorf("progress of query %q of tenant %q: %w", name, tenant, err)
	}
	return p, nil
}

// ResetGeneration returns how many registrations have reset the state of
// the tenant's query name. While the query exists it only grows, and it
// grows in the same transaction as the reset, so a value beyond one read
// earlier proves that a reset has committed since.
func (d *DB) ResetGeneration(ctx context.Context, tenant, name string) (int64, error) {
	var g *int64
	if err := d.pool.QueryRow(ctx, `SELECT queen_streams.query_reset_generation(p_tenant => $1, p_name => $2)`, tenant, name).Scan(&g); err != nil {
		return 0, fmt.Errorf("read reset generation of query %q of tenant %q: %w", name, tenant, err)
	}
	if g == nil {
		return 0, fmt.Errorf("read reset generation of query %q of tenant %q: %w", name, tenant, ErrNoQuery)
	}
	return *g, nil
}

// Suspend sets whether the tenant's query name is suspended: while it is,
// the broker answers the pops of its consumer group, group, with nothing
// and refuses its cycles. It reports whether the query exists.
func (d *DB) Suspend(ctx context.Context, tenant, name, group string, suspended bool) (bool, error) {
	var found bool
	err := d.pool.QueryRow(ctx, `SELECT queen_streams.query_suspend(p_tenant => $1, p_name => $2, p_group => $3, p_suspended => $4)`,
		tenant, name, group, suspended).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("set suspended of query %q of tenant %q to %t: %w", name, tenant, suspended, err)
	}
	return found, nil
}

// Rewound is what a rewind did.
type Rewound struct {
	// Already says that the rewind of this token had committed before:
	// nothing changed now, and StateRows is unknown (0).
	Already    bool
	At         time.Time // when the rewind committed
	Partitions int32     // cursors moved
	StateRows  int64     // state rows deleted
}

// Rewind deletes the state of the tenant's query name and moves its
// consumer group, group, to the first message created at or after to, in
// one transaction, once per token (queen_streams.query_rewind).
func (d *DB) Rewind(ctx context.Context, tenant, name, group, token string, to time.Time) (Rewound, error) {
	var (
		rw      Rewound
		outcome string
		at      *time.Time
		parts   *int32
		rows    *int64
	)
	err := d.pool.QueryRow(ctx, `SELECT outcome, rewound_at, partitions, state_rows
  FROM queen_streams.query_rewind(p_tenant => $1, p_name => $2, p_group => $3, p_token => $4, p_to => $5)`,
		tenant, name, group, token, to).Scan(&outcome, &at, &parts, &rows)
	if err == nil && outcome == "missing" {
		err = ErrNoQuery
	}
	if err != nil {
		return rw, fmt.Errorf("rewind query %q of tenant %q to %s: %w", name, tenant, to.Format(time.RFC3339Nano), err)
	}
	rw.Already = outcome == "already"
	if at != nil {
		rw.At = *at
	}
	if parts != nil {
		rw.Partitions = *parts
	}
	if rows != nil {
		rw.StateRows = *rows
	}
	return rw, nil
}
