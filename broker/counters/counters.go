// Package counters keeps the per-minute operation counts behind the
// analytics routes (queue-admin-api.md §5): pushes, pops, acks, dead
// letters, transactions and pop lag per tenant, queue and minute, and the
// long-polls parked on each queue. The data path only adds to a map in
// memory; Run adds the counts to queen.queue_minutes every few seconds, so
// counting never costs a push, pop or ack a database round trip.
package counters

import (
	"sync"
	"time"
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

// Columns are the queen.queue_minutes columns of the fields, in order.
var Columns = [Fields]string{"push_requests", "push_messages", "pop_requests", "pop_messages", "pop_empty",
	"ack_requests", "ack_success", "ack_failed", "dead_lettered", "transactions", "lag_sum_ms", "lag_count", "parked_sum"}

type queueKey struct{ tenant, queue string }

type key struct {
	queueKey
	minute int64 // Unix minutes
}

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
	now     func() time.Time
}

// New returns empty counters.
func New() *Counters {
	return &Counters{buckets: map[key]*bucket{}, parked: map[queueKey]int64{}, now: time.Now}
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
func (c *Counters) take() map[key]*bucket {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.buckets
	c.buckets = make(map[key]*bucket, len(out))
	return out
}

// giveBack adds counts that could not be flushed back in, for the next try.
func (c *Counters) giveBack(taken map[key]*bucket) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
