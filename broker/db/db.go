// Package db is Regent's seam to PostgreSQL: every statement the broker
// sends, and every call of a queen or queen_streams function, is a method
// of DB, one file per family, named and typed, each one round trip. A
// refusal by the rules comes back as a typed error, never as SQL text.
//
// The streams family (the cycle, the state read, registration and the
// query listing) lives here; the queue, admin, retention, counters, quota
// and catalog families move in next (TestOnlyTheSeamImportsPgx lists the
// packages that still talk to PostgreSQL themselves, and the list only
// shrinks).
package db

import "github.com/regent-mq/regent/broker/pg"

// DB runs Regent's statements on a pool, or on a transaction.
type DB struct{ q pg.DB }

// New returns a DB on q.
func New(q pg.DB) *DB { return &DB{q: q} }
