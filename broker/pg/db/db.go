// Package db is Regent's seam to PostgreSQL: every statement the broker
// sends, and every call of a queen or queen_streams function, is a method
// of DB, one file per family, named and typed, each one round trip. A
// refusal by the rules comes back as a typed error (Refusal), never as SQL
// text, and a database that cannot be reached is told apart (Unavailable).
//
// The families: opening the pool (open.go: Open, Migrate, and the check
// that drops connections the server closed); the push (push.go, the
// allocator of the write path) and the catalog (catalog.go: the queue and
// partition lookups and the tenancy gate's); the streams family (the
// cycle, the state read, registration and the query listing); the queue's
// consumer side (queue_*.go: pop, ack, lease, dead letters, configure, a
// transaction); the system flags; the admin family (admin_*.go: the
// consumer groups and their seeks, the message, resources, status,
// analytics and trace reads, PostgreSQL's statistics); the backlog and the
// charts' history; the retention sweeps; the quota's limits and leases;
// the analytics counters' flush and the replica samples (counters.go); the
// hot list's announcements and LISTEN connections (notify.go, and Listen);
// the pool's own figures for the metrics (PoolStats). The operator's
// access to the cell database is broker/pg/celldb's, beside this package, so
// that the operator does not link the broker. TestOnlyTheSeamImportsPgx
// and TestOnlyTheSeamNamesTables keep it so; broker/doc.go states the
// layers.
package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/metrics"
)

// Querier is what a DB runs its statements on: a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

var (
	_ Querier = (*pgxpool.Pool)(nil)
	_ Querier = pgx.Tx(nil)
)

// DB runs Regent's statements on a pool.
type DB struct {
	q    Querier
	pool *pgxpool.Pool
	// dedupWindow is Options.DedupWindow in seconds, which a push carries
	// (queen.log_push_v2); nil on a DB of New, whose sessions keep theirs.
	dedupWindow *int32
	// nodes route the hot calls on Citus (Options.Route); nil otherwise,
	// and on a transaction's DB.
	nodes *nodes
}

// New returns a DB on pool.
func New(pool *pgxpool.Pool) *DB { return &DB{q: pool, pool: pool} }

// PoolStats are the pools' own figures now, summed over the coordinator's
// and, on Citus with Options.Route, each node's; reading them costs no
// query.
func (d *DB) PoolStats() metrics.PoolStats {
	var out metrics.PoolStats
	for _, p := range append([]*pgxpool.Pool{d.pool}, d.nodes.all()...) {
		s := p.Stat()
		out.MaxConns += int64(s.MaxConns())
		out.TotalConns += int64(s.TotalConns())
		out.AcquiredConns += int64(s.AcquiredConns())
		out.IdleConns += int64(s.IdleConns())
		out.ConstructingConns += int64(s.ConstructingConns())
		out.Acquires += s.AcquireCount()
		out.EmptyAcquires += s.EmptyAcquireCount()
		out.CanceledAcquires += s.CanceledAcquireCount()
		out.NewConns += s.NewConnsCount()
		out.AcquireWait += s.AcquireDuration()
	}
	return out
}
