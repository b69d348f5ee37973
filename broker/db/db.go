// Package db is Regent's seam to PostgreSQL: every statement the broker
// sends, and every call of a queen or queen_streams function, is a method
// of DB, one file per family, named and typed, each one round trip. A
// refusal by the rules comes back as a typed error, never as SQL text.
//
// The families here: opening the pool (open.go: Open, Migrate, and the
// check that drops connections the server closed); the streams family (the
// cycle, the state read, registration and the query listing); the queue's
// consumer side (queue_*.go: pop, ack, lease, dead letters, configure); the
// system flags; the admin family (admin_*.go: the consumer groups and their
// seeks, the message, resources, status, analytics and trace reads,
// PostgreSQL's statistics); the backlog and the charts' history; the
// retention sweeps; the quota's limits and leases; the analytics counters'
// flush and the replica samples (counters.go); the hot list's
// announcements and LISTEN connections (notify.go); the pool's own figures
// for the metrics (PoolStats). The operator's access to the cell database
// is Cell (operator*.go), which calls SQL functions only. The push and
// catalog families move in next (TestOnlyTheSeamImportsPgx and
// TestOnlyTheSeamNamesTables list the packages that still talk to
// PostgreSQL themselves, and the lists only shrink).
package db

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg"
)

// QueueMode is the consumer group of a request that names none: plain
// competing consumers. queen.pop knows it too, for its subscription rule.
const QueueMode = "__QUEUE_MODE__"

// DB runs Regent's statements on a pool.
type DB struct {
	q    pg.DB
	pool *pgxpool.Pool
}

// New returns a DB on pool.
func New(pool *pgxpool.Pool) *DB { return &DB{q: pool, pool: pool} }

// PoolStats are the pool's own figures now; reading them costs no query.
func (d *DB) PoolStats() metrics.PoolStats {
	s := d.pool.Stat()
	return metrics.PoolStats{
		MaxConns: int64(s.MaxConns()), TotalConns: int64(s.TotalConns()), AcquiredConns: int64(s.AcquiredConns()),
		IdleConns: int64(s.IdleConns()), ConstructingConns: int64(s.ConstructingConns()),
		Acquires: s.AcquireCount(), EmptyAcquires: s.EmptyAcquireCount(), CanceledAcquires: s.CanceledAcquireCount(),
		NewConns: s.NewConnsCount(), AcquireWait: s.AcquireDuration(),
	}
}
