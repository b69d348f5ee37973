package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// InTx runs fn in one database transaction, on a DB whose statements all
// run in it, and commits it when fn returns nil.
func (d *DB) InTx(ctx context.Context, fn func(tx *DB) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(&DB{q: tx, pool: d.pool, dedupWindow: d.dedupWindow}) })
}

// Over returns a DB whose statements run on q: a test's wrapper of a pool
// that counts or interposes on the round trips. It has no pool of its own,
// so InTx and ListenOnce are not for it.
func Over(q Querier) *DB { return &DB{q: q} }

// Conn is what d runs its statements on, the pool or a transaction, for
// the tests that set up or inspect rows the broker has no statement for.
func (d *DB) Conn() Querier { return d.q }
