// Package store is the streams routes' storage: each function is one round
// trip to PostgreSQL, most of them a call of a queen_streams procedure.
package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the store needs from a pool or a connection.
type DB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Registration is one POST /streams/v1/queries.
type Registration struct {
	Tenant     string
	Name       string
	Source     string
	Sink       string // empty is stored as NULL
	ConfigHash string
	Reset      bool
}

// Outcome is what a registration came to.
type Outcome string

const (
	// Registered: inserted (Fresh) or re-registered.
	Registered Outcome = "registered"
	// Conflict: the name exists with another config hash and no reset.
	Conflict Outcome = "conflict"
	// Denied: a new name the tenant's quota grant does not allow.
	Denied Outcome = "denied"
)

// RegisterResult is the answer of Register.
type RegisterResult struct {
	Outcome Outcome
	QueryID uuid.UUID
	Fresh   bool
	Message string // why, for Conflict and Denied
}

// Register registers or re-registers a query by name, within its tenant.
func Register(ctx context.Context, db DB, r Registration) (RegisterResult, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return RegisterResult{}, fmt.Errorf("register query %q: new id: %w", r.Name, err)
	}
	var sink *string
	if r.Sink != "" {
		sink = &r.Sink
	}
	var res RegisterResult
	var qid *uuid.UUID
	var msg *string
	err = db.QueryRow(ctx, `SELECT outcome, query_id, fresh, message
		FROM queen_streams.register($1, $2, $3, $4, $5, $6, $7)`,
		r.Tenant, r.Name, r.Source, sink, r.ConfigHash, r.Reset, id,
	).Scan(&res.Outcome, &qid, &res.Fresh, &msg)
	if err != nil {
		return RegisterResult{}, fmt.Errorf("register query %q: %w", r.Name, err)
	}
	if qid != nil {
		res.QueryID = *qid
	}
	if msg != nil {
		res.Message = *msg
	}
	return res, nil
}
