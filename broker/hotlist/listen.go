package hotlist

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Channel is the NOTIFY channel of the log. The payload is
// "<queue id>:<partition id>" when a partition may have become deliverable,
// and "<queue id>:" when the queue was deleted.
const Channel = "regent_log"

// Listener holds a LISTEN on a connection of its own (broker/db): it calls
// listening once the LISTEN has taken effect, then heard with every
// payload, until the connection fails or ctx ends.
type Listener interface {
	ListenOnce(ctx context.Context, channel string, listening func(), heard func(payload string)) error
}

// Listen holds a LISTEN on Channel on a connection of its own and applies
// every notification to l until ctx ends, reconnecting after a failure.
// Notifications sent while it was not listening are lost, so after every
// (re)connection it calls resync, which reseeds from the database. A queue
// deletion is passed to deleted as well, for the caller's own caches.
func Listen(ctx context.Context, db Listener, l *List, log *slog.Logger, resync func(context.Context), deleted func(uuid.UUID)) {
	backoff := minBackoff
	for ctx.Err() == nil {
		listened, err := listenOnce(ctx, db, l, resync, deleted)
		if ctx.Err() != nil {
			return
		}
		if listened {
			// A connection that worked says the server is fine: one lost
			// connection (a restart, a terminated backend) must not cost the
			// delays that earlier outages built up.
			backoff = minBackoff
		}
		log.Warn("hot list: LISTEN connection lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// The reconnect delay starts short, since every moment without LISTEN is a
// moment this replica's parked pops sleep through pushes on other replicas,
// and stays short while PostgreSQL is away: one connection attempt a second
// costs the server nothing.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
)

// listenOnce reports whether its LISTEN took effect before the connection
// failed.
func listenOnce(ctx context.Context, db Listener, l *List, resync func(context.Context), deleted func(uuid.UUID)) (bool, error) {
	listened := false
	err := db.ListenOnce(ctx, Channel, func() {
		listened = true
		go resync(ctx)
	}, func(payload string) {
		if q := l.apply(payload); q != uuid.Nil {
			deleted(q)
		}
	})
	return listened, err
}

// apply applies one notification and returns the queue it deleted, if any.
func (l *List) apply(payload string) uuid.UUID {
	qs, ps, ok := strings.Cut(payload, ":")
	if !ok {
		return uuid.Nil
	}
	q, err := uuid.Parse(qs)
	if err != nil {
		return uuid.Nil
	}
	if ps == "" {
		l.Forget(q)
		return q
	}
	if p, err := uuid.Parse(ps); err == nil {
		l.Mark(q, p)
	}
	return uuid.Nil
}
