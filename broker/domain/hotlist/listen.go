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

// Listener holds a LISTEN on a connection of its own (broker/pg/db): it calls
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
		l.forgetEchoes() // those sent while it was not listening never come
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
	if p, err := uuid.Parse(ps); err == nil && !l.echo(q, p) {
		l.Mark(q, p)
	}
	return uuid.Nil
}

// expectEchoes counts (n = 1) or stops counting (n = -1) on the echoes of
// announcements this replica sends.
func (l *List) expectEchoes(keys [][2]uuid.UUID, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if l.echoes[k] += n; l.echoes[k] <= 0 {
			delete(l.echoes, k)
		}
	}
}

// echo reports whether a notification of (queue, partition) is the echo
// of one this replica sent, and counts it as come back. Another replica's
// announcement of the same partition at the same time may be taken for it:
// the two say the same.
func (l *List) echo(queue, partition uuid.UUID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]uuid.UUID{queue, partition}
	if l.echoes[k] == 0 {
		return false
	}
	if l.echoes[k]--; l.echoes[k] == 0 {
		delete(l.echoes, k)
	}
	return true
}

func (l *List) forgetEchoes() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.echoes)
}
