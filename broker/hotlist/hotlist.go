// Package hotlist is a replica's in-memory index of the partitions that may
// hold undelivered data, so that a pop never scans every partition of a
// queue. Pushes, cycles and acks that make data deliverable again (announced
// by the broker after their commit, see Announcer) mark partitions, on every
// replica through Listen; a pop takes candidates from it, and settles them
// with what the database found.
//
// Entries are kept per (queue, consumer group): a partition drained for one
// group may still hold data for another. A mark reaches every group known for
// the queue. Each mark bumps the entry's generation, and a pop may drop an
// entry as empty only if no mark arrived since it took the candidate: that is
// what closes the race where a push lands between the pop's read and its
// removal of the entry (the lost wake-up).
//
// Parked long-polls wait on Wait, which is closed at the next mark of the
// queue, whichever group the mark is for.
package hotlist

import (
	"sync"
	"time"

	"github.com/google/uuid"
)

// List is safe for concurrent use.
type List struct {
	mu      sync.Mutex
	gen     uint64
	queues  map[uuid.UUID]*queue
	unknown chan struct{} // closed when a queue this replica has not seen is marked
}

type queue struct {
	groups map[string]*group
	wake   chan struct{}
}

type group struct {
	// entries holds every partition of order, each once; a removed one
	// stays (not live) until compact drops it, so that re-adding it keeps
	// its place instead of duplicating it.
	entries map[uuid.UUID]*entry
	order   []uuid.UUID // round-robin order
	next    int
	live    int
	seeded  bool
}

type entry struct {
	live      bool
	gen       uint64
	notBefore time.Time // a live lease or a delay: not worth trying before
}

// Candidate is a partition a pop may try, with the generation it saw.
type Candidate struct {
	ID  uuid.UUID
	gen uint64
}

// Outcome is what a pop found for a candidate.
type Outcome int

const (
	// Claimed: the pop leased it; it stays, eligible again at RetryAt (the
	// lease expiry) or at the next mark (the ack that releases it).
	Claimed Outcome = iota
	// Empty: nothing to deliver for the group.
	Empty
	// Busy: leased by another consumer or not yet due; retry at RetryAt.
	Busy
)

// New returns an empty list.
func New() *List {
	return &List{queues: map[uuid.UUID]*queue{}, unknown: make(chan struct{})}
}

func (l *List) queue(id uuid.UUID) *queue {
	q := l.queues[id]
	if q == nil {
		q = &queue{groups: map[string]*group{}, wake: make(chan struct{})}
		l.queues[id] = q
	}
	return q
}

// Mark records that partition may hold data for every group of queueID, and
// wakes the pops parked on the queue.
func (l *List) Mark(queueID, partition uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	q, ok := l.queues[queueID]
	if !ok {
		close(l.unknown)
		l.unknown = make(chan struct{})
		return
	}
	for _, g := range q.groups {
		g.add(partition, l.gen)
	}
	close(q.wake)
	q.wake = make(chan struct{})
}

func (g *group) add(id uuid.UUID, gen uint64) {
	e, ok := g.entries[id]
	if !ok {
		e = &entry{}
		g.entries[id] = e
		g.order = append(g.order, id)
	}
	if !e.live {
		e.live = true
		g.live++
	}
	e.gen = gen
	e.notBefore = time.Time{}
}

// Forget drops a deleted queue and wakes its parked pops.
func (l *List) Forget(queueID uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q, ok := l.queues[queueID]; ok {
		close(q.wake)
		delete(l.queues, queueID)
	}
}

// Seeded reports whether (queueID, group) has been seeded from the database.
func (l *List) Seeded(queueID uuid.UUID, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q, ok := l.queues[queueID]
	if !ok {
		return false
	}
	g, ok := q.groups[name]
	return ok && g.seeded
}

// Seed adds partitions found in the database for (queueID, group). It only
// adds: an entry is removed by a pop that found it empty, never by a sweep
// that might race a push. It reports whether it added any.
func (l *List) Seed(queueID uuid.UUID, name string, partitions []uuid.UUID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue(queueID)
	g, ok := q.groups[name]
	if !ok {
		g = &group{entries: map[uuid.UUID]*entry{}}
		q.groups[name] = g
	}
	g.seeded = true
	l.gen++
	woke := false
	for _, id := range partitions {
		if e, ok := g.entries[id]; !ok || !e.live {
			g.add(id, l.gen)
			woke = true
		}
	}
	if woke {
		close(q.wake)
		q.wake = make(chan struct{})
	}
	return woke
}

// Groups returns every (queue, group) pair known to this replica, for the
// reseed sweep.
func (l *List) Groups() map[uuid.UUID][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[uuid.UUID][]string, len(l.queues))
	for id, q := range l.queues {
		for name := range q.groups {
			out[id] = append(out[id], name)
		}
	}
	return out
}

// Candidates returns up to n partitions of (queueID, group) that are worth
// trying now, continuing round-robin from the previous call so that
// competing consumers spread over the partitions. It also returns when the
// earliest deferred entry becomes due (zero when none is deferred), so that a
// parked pop can wake for a lease expiry.
func (l *List) Candidates(queueID uuid.UUID, name string, n int, now time.Time) ([]Candidate, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q, ok := l.queues[queueID]
	if !ok {
		return nil, time.Time{}
	}
	g, ok := q.groups[name]
	if !ok {
		return nil, time.Time{}
	}
	g.compact()
	var out []Candidate
	var due time.Time
	size := len(g.order)
	for i := 0; i < size && len(out) < n; i++ {
		id := g.order[(g.next+i)%size]
		e := g.entries[id]
		if !e.live {
			continue
		}
		if e.notBefore.After(now) {
			if due.IsZero() || e.notBefore.Before(due) {
				due = e.notBefore
			}
			continue
		}
		out = append(out, Candidate{ID: id, gen: e.gen})
	}
	if size > 0 {
		g.next = (g.next + 1) % size
	}
	return out, due
}

// compact drops removed entries once they are half of the order, so that a
// pass over it stays proportional to the live ones.
func (g *group) compact() {
	if len(g.order) < 2*g.live+8 {
		return
	}
	live := g.order[:0]
	for _, id := range g.order {
		if g.entries[id].live {
			live = append(live, id)
		} else {
			delete(g.entries, id)
		}
	}
	clear(g.order[len(live):])
	g.order = live
	g.next = 0
}

// Settle records what a pop found for candidate c: an Empty entry is removed
// unless it was marked since c was taken; Claimed and Busy entries are
// deferred until retryAt (zero: not deferred).
func (l *List) Settle(queueID uuid.UUID, name string, c Candidate, o Outcome, retryAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q, ok := l.queues[queueID]
	if !ok {
		return
	}
	g, ok := q.groups[name]
	if !ok {
		return
	}
	e, ok := g.entries[c.ID]
	if !ok || !e.live || e.gen != c.gen {
		return // marked since: keep it as the mark left it
	}
	switch o {
	case Empty:
		e.live = false
		g.live--
	default:
		e.notBefore = retryAt
	}
}

// Wait returns a channel closed at the next mark of queueID, or of a queue
// this replica does not know yet when queueID is the zero id (a pop on a
// queue that does not exist yet).
func (l *List) Wait(queueID uuid.UUID) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if queueID == uuid.Nil {
		return l.unknown
	}
	return l.queue(queueID).wake
}
