// Package pg is what the broker's storage code shares about PostgreSQL: the
// one interface it runs statements on (a pool or a transaction), ids in the
// form pgx encodes cheaply, and what an error from the database means for
// the request that met it.
package pg

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is a pool or a transaction.
type DB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

var (
	_ DB = (*pgxpool.Pool)(nil)
	_ DB = pgx.Tx(nil)
)

// RefusalCode is the SQLSTATE of every refusal Regent's own SQL raises
// (RAISE EXCEPTION's default, raise_exception): the request breaks a rule,
// and the message is written for the client. No other code is a refusal.
const RefusalCode = "P0001"

// Refused is a refusal raised by Regent's SQL. Message is written for the
// client; Code, the raise's DETAIL, names the rule for the code that must
// act on it (a quota's "quota.maxStateRows"), and is empty when nothing
// does. Code is what Go reads, never the message's wording.
type Refused struct{ Message, Code string }

// Refusal returns the refusal raised by Regent's SQL that err is.
func Refusal(err error) (Refused, bool) {
	var e *pgconn.PgError
	if errors.As(err, &e) && e.Code == RefusalCode {
		return Refused{Message: e.Message, Code: e.Detail}, true
	}
	return Refused{}, false
}

// Unavailable reports whether err says that the database could not be
// reached, or went away or refused new work while the request ran: the
// request can be retried once the database is back, so it is a 503, not
// the broker's fault.
func Unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03", // admin or crash shutdown, cannot connect now
			"53300", // too many connections
			"25006": // read-only transaction: a standby, before a failover completes
			return true
		}
		return pe.Code[:2] == "08" // connection exception
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}

// ID hands an id to pgx as [16]byte, which it encodes in binary; a
// uuid.UUID goes through its text form (it is a driver.Valuer), which a
// profile of the ack route found costing a fifth of its CPU.
func ID(id uuid.UUID) [16]byte { return id }

// IDs is ID for a slice.
func IDs(ids []uuid.UUID) [][16]byte {
	out := make([][16]byte, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// NewID returns a UUIDv7, falling back to a random UUID only if the clock
// source fails, which the uuid package reports as an error.
func NewID() uuid.UUID {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.New()
	}
	return id
}
