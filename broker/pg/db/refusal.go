package db

import (
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
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
