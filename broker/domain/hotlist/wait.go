package hotlist

import (
	"container/list"

	"github.com/google/uuid"
)

// Waiter is a pop's place in the line of its (queue, group) for a
// wake-up. Every method is safe on a nil Waiter, which has no place.
type Waiter struct {
	l         *List
	c         chan struct{}
	g         *group        // nil: not in a line
	el        *list.Element // its place in g.line
	partition uuid.UUID     // the only partition it can take; uuid.Nil: any
	woken     uuid.UUID     // the partition it was woken for, not yet used
}

// Wait puts a pop of (queueID, group) at the end of its line, before the
// pop looks, so that a mark that lands while it looks still wakes it. A
// mark wakes the first pop in line that can take its partition: any of the
// queue (partition uuid.Nil) or that partition (the partition route). A
// pop of a queue this replica does not know yet (queueID uuid.Nil) is not
// in a line: it is woken, with all the others, by the next mark of a queue
// unknown here.
func (l *List) Wait(queueID uuid.UUID, name string, partition uuid.UUID) *Waiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if queueID == uuid.Nil {
		return &Waiter{l: l, c: l.unknown}
	}
	w := &Waiter{l: l, c: make(chan struct{}), g: l.queue(queueID).group(name), partition: partition}
	w.el = w.g.line.PushBack(w)
	if e, ok := w.g.entries[partition]; ok {
		e.waking, e.handed = false, false // the partition route looks at it now, without Candidates
	}
	return w
}

// Watch returns a channel closed at the next mark of queueID, any
// partition: for a pop of a partition that does not exist yet, whose first
// push creates it. It takes no wake-up from the pops in line.
func (l *List) Watch(queueID uuid.UUID) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue(queueID)
	if q.watch == nil {
		q.watch = make(chan struct{})
	}
	return q.watch
}

// C is closed when the pop is woken.
func (w *Waiter) C() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.c
}

// Take leaves the line and returns the partition the pop was woken for
// (uuid.Nil: none), which the pop, looking again, now tries first.
func (w *Waiter) Take() uuid.UUID {
	if w == nil {
		return uuid.Nil
	}
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	w.leave()
	p := w.woken
	w.woken = uuid.Nil
	return p
}

// Leave leaves the line for good. A wake-up the pop got and did not use
// (it answered, or stopped waiting, first) goes to the next pop in line
// that can take its partition, so that no wake-up is lost, unless a pop
// has taken that partition since.
func (w *Waiter) Leave() {
	if p := w.Take(); p != uuid.Nil {
		w.l.mu.Lock()
		defer w.l.mu.Unlock()
		if e, ok := w.g.entries[p]; ok {
			e.handed = false
			if e.live && e.waking {
				w.g.wake(p)
			}
		}
	}
}

func (w *Waiter) leave() {
	if w.el != nil {
		w.g.line.Remove(w.el)
		w.el = nil
	}
}

// wake wakes the pop, which has left the line, for partition.
func (w *Waiter) wake(partition uuid.UUID) {
	w.el = nil
	w.woken = partition
	close(w.c)
}

// wake hands partition to the first pop in line that can take it.
func (g *group) wake(partition uuid.UUID) {
	for el := g.line.Front(); el != nil; el = el.Next() {
		if w := el.Value.(*Waiter); w.partition == uuid.Nil || w.partition == partition {
			g.line.Remove(el)
			w.wake(partition)
			if e, ok := g.entries[partition]; ok {
				e.handed = true
			}
			return
		}
	}
}
