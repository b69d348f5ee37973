package quota

import "sync"

// bucket is this replica's holding of one rate limit's tokens, leased from
// the tenant's shared bucket in the database.
type bucket struct {
	kind        string // its bucket in queen_streams.quota_budget
	rate, burst int64

	mu sync.Mutex
	// tokens are leased and not yet spent; below zero, the debt of pops
	// that delivered more than the holding.
	tokens int64
	// need is the largest request refused since the last lease, so that
	// a request larger than a slice can still be leased for.
	need int64
}

// resized returns the bucket for a rate and burst (nil burst: the rate),
// keeping b when they have not changed; nil when the rate is nil.
func (b *bucket) resized(kind string, rate, burst *int64) *bucket {
	if rate == nil {
		return nil
	}
	nb := &bucket{kind: kind, rate: *rate, burst: *rate}
	if burst != nil {
		nb.burst = *burst
	}
	if b != nil && b.rate == nb.rate && b.burst == nb.burst {
		return b
	}
	return nb
}

// slice is what one lease aims to hold: a tenth of a second of the rate.
func (b *bucket) slice() int64 { return max(1, b.rate/10) }

// take spends n tokens when the holding covers them, and says whether the
// holding is now low enough to lease more.
func (b *bucket) take(n int64) (ok, low bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens >= n {
		b.tokens -= n
		ok = true
	} else if n <= b.burst {
		b.need = max(b.need, n)
	}
	return ok, b.tokens < b.slice()
}

// debit spends n tokens the caller has already used.
func (b *bucket) debit(n int64) {
	b.mu.Lock()
	b.tokens -= n
	b.mu.Unlock()
}

// refund gives back n tokens a refused request spent; nil: no limit.
func (b *bucket) refund(n int64) {
	if b != nil {
		b.debit(-n)
	}
}

// credit adds n leased tokens.
func (b *bucket) credit(n int64) {
	b.mu.Lock()
	b.tokens += n
	b.need = 0
	b.mu.Unlock()
}

// want is how many tokens to lease now: up to two slices, or the largest
// refused request, whichever is more; 0 when the holding is enough.
func (b *bucket) want() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(0, max(2*b.slice(), b.need)-b.tokens)
}
