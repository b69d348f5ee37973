// Package counters keeps the per-minute operation counts behind the
// analytics routes (queue-admin-api.md §5): pushes, pops, acks, dead
// letters, transactions and pop lag per tenant, queue and minute, and the
// long-polls parked on each queue; and each stream query's cycles, committed
// and refused, per minute. The data path only adds to a map in memory; Run
// adds the counts to queen.queue_minutes and queen_streams.query_minutes
// every few seconds, so counting never costs a push, pop, ack or cycle a
// database round trip.
package counters

import (
	"sync"
	"time"

	"github.com/google/uuid"
)

// Field is one count of a queue's minute.
type Field int

// The counts, in the column order of queen.queue_minutes.
const (
	PushRequests Field = iota
	PushMessages
	PopRequests // pops that delivered
	PopMessages
	PopEmpty // pops answered 204
	AckRequests
	AckSuccess
	AckFailed
	DeadLettered
	Transactions
	LagSum // ms
	LagCount
	ParkedSum // long-polls parked, sampled once a second
	Fields    // the number of fields
)

type queueKey struct{ tenant, queue string }

type key struct {
	queueKey
	minute int64 // Unix minutes
}

// queryKey is a stream query's minute.
type queryKey struct {
	tenant string
	query  uuid.UUID
	minute int64 // Unix minutes
}

// cycles are a query's minute: committed and refused.
type cycles [2]int64

type bucket struct {
	n      [Fields]int64
	lagMax int64
}

// Counters is one replica's counts since its last flush. Safe for
// concurrent use.
type Counters struct {
	mu      sync.Mutex
	buckets map[key]*bucket
	parked  map[queueKey]int64 // long-polls parked now
	cycles  map[queryKey]*cycles
	now     func() time.Time
}

// New returns empty counters.
func New() *Counters {
	return &Counters{buckets: map[key]*bucket{}, parked: map[queueKey]int64{}, cycles: map[queryKey]*cycles{}, now: time.Now}
}

// Cycle counts a cycle of a stream query that reached the database:
// committed, or refused by the rules.
func (c *Counters) Cycle(tenant string, query uuid.UUID, refused bool) {
	k := queryKey{tenant, query, c.now().Unix() / 60}
	c.mu.Lock()
	n := c.cycles[k]
	if n == nil {
		n = &cycles{}
		c.cycles[k] = n
	}
	if refused {
		n[1]++
	} else {
		n[0]++
	}
	c.mu.Unlock()
}

// bucketLocked is the current minute's bucket of a queue.
func (c *Counters) bucketLocked(tenant, queue string) *bucket {
	k := key{queueKey{tenant, queue}, c.now().Unix() / 60}
	b := c.buckets[k]
	if b == nil {
		b = &bucket{}
		c.buckets[k] = b
	}
	return b
}

// Add adds n to a count of the queue's current minute.
func (c *Counters) Add(tenant, queue string, f Field, n int64) {
	c.mu.Lock()
	c.bucketLocked(tenant, queue).n[f] += n
	c.mu.Unlock()
}

// Popped counts a pop that delivered n messages whose lags, in ms from
// creation to delivery, sum to lagSum with the largest lagMax.
func (c *Counters) Popped(tenant, queue string, n, lagSum, lagMax int64) {
	c.mu.Lock()
	b := c.bucketLocked(tenant, queue)
	b.n[PopRequests]++
	b.n[PopMessages] += n
	b.n[LagSum] += lagSum
	b.n[LagCount] += n
	b.lagMax = max(b.lagMax, lagMax)
	c.mu.Unlock()
}

// Park counts a long-poll that starts (+1) or stops (-1) waiting on a queue.
func (c *Counters) Park(tenant, queue string, d int64) {
	k := queueKey{tenant, queue}
	c.mu.Lock()
	if n := c.parked[k] + d; n > 0 {
		c.parked[k] = n
	} else {
		delete(c.parked, k)
	}
	c.mu.Unlock()
}

// sampleParked adds the long-polls parked now to each queue's minute.
func (c *Counters) sampleParked() {
	c.mu.Lock()
	for k, n := range c.parked {
		c.bucketLocked(k.tenant, k.queue).n[ParkedSum] += n
	}
	c.mu.Unlock()
}

// take returns the counts so far and starts afresh.
func (c *Counters) take() (map[key]*bucket, map[queryKey]*cycles) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, cyc := c.buckets, c.cycles
	c.buckets = make(map[key]*bucket, len(out))
	c.cycles = make(map[queryKey]*cycles, len(cyc))
	return out, cyc
}

// giveBack adds counts that could not be flushed back in, for the next try.
func (c *Counters) giveBack(taken map[key]*bucket, cyc map[queryKey]*cycles) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, t := range cyc {
		if n := c.cycles[k]; n != nil {
			n[0], n[1] = n[0]+t[0], n[1]+t[1]
		} else {
			c.cycles[k] = t
		}
	}
	for k, t := range taken {
		b := c.buckets[k]
		if b == nil {
			c.buckets[k] = t
			continue
		}
		for f := range b.n {
			b.n[f] += t.n[f]
		}
		b.lagMax = max(b.lagMax, t.lagMax)
	}
}
