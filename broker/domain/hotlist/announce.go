package hotlist

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Linger is how long an announcement waits for others to join it. It bounds
// the delay another replica sees before a parked pop there wakes; this
// replica's own list is marked at once.
const Linger = 5 * time.Millisecond

// Notifier is what an Announcer sends its notifications through
// (broker/pg/db): each payload a notification of its own, in one statement
// whose commit does not wait for the WAL flush.
type Notifier interface {
	Notify(ctx context.Context, channel string, payloads []string) error
}

// Announcer tells every replica's hot list that a partition may hold data to
// deliver, once the transaction that made it so has committed: it marks this
// replica's list at once, and NOTIFYs Channel for the others (this one
// receives it too, harmlessly).
//
// The writers' transactions do not NOTIFY themselves: one that does holds a
// database-wide lock from its pre-commit to the end of its commit, across
// the WAL flush, and so serialised the commits of all of them. Instead,
// announcements made within Linger of each other go out together, each
// partition once, in one transaction that does not wait for the flush. A
// broker that dies between a commit and its announcement leaves the other
// replicas to find the partition at their next reseed, as with any lost
// notification.
type Announcer struct {
	list *List
	db   Notifier
	log  *slog.Logger

	mu      sync.Mutex
	pending map[[2]uuid.UUID]struct{}
	wake    chan struct{} // holds a token while pending is not empty
}

// NewAnnouncer returns an Announcer for l that notifies through db. Nothing
// is sent until Run runs.
func NewAnnouncer(l *List, db Notifier, log *slog.Logger) *Announcer {
	return &Announcer{list: l, db: db, log: log, pending: map[[2]uuid.UUID]struct{}{}, wake: make(chan struct{}, 1)}
}

// Announce marks the partition in this replica's list and queues its
// notification. Call it only after the commit that put the data there.
func (a *Announcer) Announce(queueID, partition uuid.UUID) {
	a.list.Mark(queueID, partition)
	a.mu.Lock()
	a.pending[[2]uuid.UUID{queueID, partition}] = struct{}{}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Run sends the queued notifications until ctx ends, then sends what is
// left.
func (a *Announcer) Run(ctx context.Context) {
	linger := time.NewTimer(Linger)
	linger.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-a.wake:
			linger.Reset(Linger)
			select {
			case <-ctx.Done():
			case <-linger.C:
				a.flush(ctx)
			}
		}
	}
	final, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	a.flush(final)
}

// flush sends what is pending in one statement. A failure is logged and the
// notifications dropped: the listeners' reseed finds those partitions.
func (a *Announcer) flush(ctx context.Context) {
	a.mu.Lock()
	if len(a.pending) == 0 {
		a.mu.Unlock()
		return
	}
	payloads := make([]string, 0, len(a.pending))
	keys := make([][2]uuid.UUID, 0, len(a.pending))
	for k := range a.pending {
		payloads = append(payloads, k[0].String()+":"+k[1].String())
		keys = append(keys, k)
	}
	clear(a.pending)
	a.mu.Unlock()
	a.list.expectEchoes(keys, 1)
	if err := a.db.Notify(ctx, Channel, payloads); err != nil {
		a.list.expectEchoes(keys, -1)
		a.log.Warn("hot list: announcing partitions failed; other replicas find them at their next reseed",
			"partitions", len(payloads), "err", err)
	}
}
