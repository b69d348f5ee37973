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
// A pop waits for a wake-up in the line of its (queue, group), in arrival
// order (Wait). A mark is one partition, which at most one pop of a group
// can lease, so it wakes one pop per group: the first in line that can take
// that partition, which tries it first (Candidates). A pop that leaves
// without using its wake-up gives it to the next in line (Waiter.Leave).
// The first pop to take a partition so marked, woken for it or not, keeps
// it from the others until it settles or returns it: one database call
// per mark, not one for each pop that saw it.
package hotlist

import (
	"container/list"
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
	// echoes are this replica's announcements on their way back through
	// LISTEN: it marked them when it made them, and a second mark would
	// wake a second pop for a partition that the first one has leased.
	echoes map[[2]uuid.UUID]int
}

type queue struct {
	groups map[string]*group
	watch  chan struct{} // closed at the next mark (Watch); nil until asked for
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
	line    list.List // of *Waiter, in arrival order
}

type entry struct {
	live      bool
	gen       uint64
	notBefore time.Time // a live lease or a delay: not worth trying before
	// waking: marked since a pop last took it, so a pop has been woken for
	// it (or none was in line, and the next to look takes it). Another mark
	// (the next push, the announcement's echo through LISTEN) has no work
	// for a second pop of the group, which could not lease it.
	waking bool
	// handed: the wake-up owed for it went to a pop in line that has not
	// looked yet. A candidate returned meanwhile wakes no second pop.
	handed bool
	// held: notBefore is the hold of the pop that took it (take), not a
	// lease or a delay.
	held  bool
	takes uint64 // how many times a pop has taken it as a candidate
}

// Candidate is a partition a pop may try, with what it saw of its entry:
// the generation, whether a wake-up was owed for it, and its takes.
type Candidate struct {
	ID     uuid.UUID
	gen    uint64
	waking bool
	takes  uint64
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
	return &List{queues: map[uuid.UUID]*queue{}, unknown: make(chan struct{}), echoes: map[[2]uuid.UUID]int{}}
}

func (l *List) queue(id uuid.UUID) *queue {
	q := l.queues[id]
	if q == nil {
		q = &queue{groups: map[string]*group{}}
		l.queues[id] = q
	}
	return q
}

func (q *queue) group(name string) *group {
	g := q.groups[name]
	if g == nil {
		g = &group{entries: map[uuid.UUID]*entry{}}
		q.groups[name] = g
	}
	return g
}

// Mark records that partition may hold data for every group of queueID, and
// wakes one pop of each group for it.
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
		if g.add(partition, l.gen) {
			g.wake(partition)
		}
	}
	if q.watch != nil {
		close(q.watch)
		q.watch = nil
	}
}

// add marks entry id and reports whether a pop is to be woken for it.
func (g *group) add(id uuid.UUID, gen uint64) bool {
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
	e.notBefore, e.held = time.Time{}, false
	wake := !e.waking
	e.waking = true
	return wake
}

// Forget drops a deleted queue and wakes all of its pops.
func (l *List) Forget(queueID uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q, ok := l.queues[queueID]
	if !ok {
		return
	}
	for _, g := range q.groups {
		for g.line.Len() > 0 {
			g.line.Remove(g.line.Front()).(*Waiter).wake(uuid.Nil)
		}
	}
	if q.watch != nil {
		close(q.watch)
	}
	delete(l.queues, queueID)
}

// Seeded reports whether (queueID, group) has been seeded from the database.
func (l *List) Seeded(queueID uuid.UUID, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.find(queueID, name)
	return g != nil && g.seeded
}

// find returns the entries of (queueID, group), nil when there are none.
func (l *List) find(queueID uuid.UUID, name string) *group {
	if q, ok := l.queues[queueID]; ok {
		return q.groups[name]
	}
	return nil
}

// Seed adds partitions found in the database for (queueID, group). It only
// adds: an entry is removed by a pop that found it empty, never by a sweep
// that might race a push. It reports whether it added any.
func (l *List) Seed(queueID uuid.UUID, name string, partitions []uuid.UUID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.queue(queueID).group(name)
	g.seeded = true
	l.gen++
	added := false
	for _, id := range partitions {
		if e, ok := g.entries[id]; !ok || !e.live {
			if g.add(id, l.gen) {
				g.wake(id)
			}
			added = true
		}
	}
	return added
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

// wokenHold bounds how long the partition a pop was woken for (or took
// while a wake-up was owed for it) is kept from the other pops while that
// pop tries it: until it settles or returns it, or a mark comes, and
// wokenHold at most. Without it the consumer whose ack woke the pop came
// back at once and tried the same partition, a database call for nothing
// on every ack at 64 consumers. Only partitions marked since a pop last
// took them, each back at once when untried: not the hold that was
// reverted (see Candidates).
const wokenHold = time.Second

// Candidates returns up to n partitions of (queueID, group) that are worth
// trying now: first (uuid.Nil: none), the partition whose mark woke the pop
// (Waiter.Take; kept from the others for wokenHold at most), then others,
// continuing round-robin from the previous call so that competing
// consumers spread over the partitions. It also returns when the earliest
// deferred entry becomes due (zero when none is deferred), so that a parked
// pop can wake for a lease expiry or the end of a hold.
//
// An entry is kept from a pop because another pop has it only while that
// pop tries it, and only when the other was woken for it or a wake-up was
// owed for it (take). The hold that was reverted (3612160) hid every
// candidate a pop took, five a pop, from every other pop for up to a
// second, most of them candidates it would never try, and an entry coming back from a hold
// (returned untried, or its second over) woke no pop: a pop that saw only
// held entries slept until the earliest hold ended or an unrelated mark
// came. Consumers that long-poll briefly and stop after a few empty answers
// (regent-bench: 1 s, six in a row) could stop with messages waiting, as at
// P = 10,000, where they stopped at 57 % (a run not repeated since:
// 3612160, and the hold on a later base, each consumed everything in one
// run here). Here an entry kept from the others is being tried by the pop
// that has it, or comes back at once (Return: a candidate the pop did not
// try is released and its owed wake-up wakes a pop in line), every other
// entry worth trying is seen by every pop, and whatever makes an entry
// worth trying again (a mark, a seed, a return) wakes a pop in line.
func (l *List) Candidates(queueID uuid.UUID, name string, n int, now time.Time, first uuid.UUID) ([]Candidate, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.find(queueID, name)
	if g == nil {
		return nil, time.Time{}
	}
	g.compact()
	var out []Candidate
	var due time.Time
	if e, ok := g.entries[first]; ok {
		e.handed = false // the pop it was handed to has come
		if e.live && !e.notBefore.After(now) && n > 0 {
			out = append(out, e.take(first, now, true))
		}
	}
	took := len(out) > 0
	size := len(g.order)
	for i := 0; i < size && len(out) < n; i++ {
		id := g.order[(g.next+i)%size]
		e := g.entries[id]
		if !e.live || (took && id == first) {
			continue
		}
		if e.notBefore.After(now) {
			if due.IsZero() || e.notBefore.Before(due) {
				due = e.notBefore
			}
			continue
		}
		out = append(out, e.take(id, now, false))
	}
	if size > 0 {
		g.next = (g.next + 1) % size
	}
	return out, due
}

// take hands entry id to a pop as a candidate. A mark from now on wakes a
// pop for it again. The pop keeps it from the others (wokenHold at most)
// when it was woken for it (woken), or when the entry was owed a
// wake-up: otherwise the pop woken for it, and the consumer that came
// back from the ack that marked it, both tried it, one for nothing.
func (e *entry) take(id uuid.UUID, now time.Time, woken bool) Candidate {
	e.takes++
	c := Candidate{ID: id, gen: e.gen, waking: e.waking, takes: e.takes}
	if woken || e.waking {
		e.notBefore, e.held = now.Add(wokenHold), true
	}
	e.waking = false
	return c
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
// deferred until retryAt. A Busy without a retryAt (its row was locked by
// another pop or an ack) ends a woken pop's hold, but leaves the lease
// that another pop's claim has settled since: the locker was that pop,
// and clearing its lease made the partition a candidate for every pop.
func (l *List) Settle(queueID uuid.UUID, name string, c Candidate, o Outcome, retryAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.find(queueID, name)
	if g == nil {
		return
	}
	e, ok := g.entries[c.ID]
	if !ok || !e.live || e.gen != c.gen {
		return // marked since: keep it as the mark left it
	}
	switch {
	case o == Empty:
		e.live = false
		g.live--
		if g.live == 0 {
			// Drained: its removed entries only kept their places in the
			// order, and a queue no one pushes to again would keep them
			// for good (compact runs when a pop looks).
			g.entries, g.order, g.next = map[uuid.UUID]*entry{}, nil, 0
		}
	case o == Busy && retryAt.IsZero() && !e.held:
	default:
		e.notBefore, e.held = retryAt, false
	}
}

// Return gives back candidates a pop took and did not try, since it had
// what it wanted first. One that was owed a wake-up when the pop took it
// owes it again, and wakes a pop as its mark would have, unless it was
// marked or taken by another pop since, or the pop it was handed to has
// not come yet. Any other wakes nobody: it is as it was before the pop
// took it, a candidate for every pop that looks, and waking a pop for it
// (usually a partition leased since its last look) woke pops for work
// that was not there, a database call for nothing each.
func (l *List) Return(queueID uuid.UUID, name string, cs []Candidate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.find(queueID, name)
	if g == nil {
		return
	}
	for _, c := range cs {
		e, ok := g.entries[c.ID]
		if !ok || !e.live || e.gen != c.gen || e.takes != c.takes {
			continue
		}
		if e.held {
			e.notBefore, e.held = time.Time{}, false
		}
		if c.waking && !e.waking {
			e.waking = true
			if !e.handed {
				g.wake(c.ID)
			}
		}
	}
}
