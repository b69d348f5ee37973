package quota

import (
	"context"
	"time"

	"github.com/regent-mq/regent/broker/pg/db"
)

// leaseGap spaces the lease rounds, so that a tenant pushing against an
// empty bucket costs a replica at most 50 small statements a second.
const leaseGap = 20 * time.Millisecond

// Lease tops up the buckets that run low, on a kick, and at least
// every 100 ms, until ctx ends.
func (q *Quotas) Lease(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.kick:
		case <-t.C:
		}
		if err := q.lease(ctx); err != nil && ctx.Err() == nil {
			q.log.Warn("quota: lease of rate tokens failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(leaseGap):
		}
	}
}

// lease asks the database for the tokens every low bucket wants, in one
// round trip.
func (q *Quotas) lease(ctx context.Context) error {
	m := q.tenants.Load()
	if m == nil {
		return nil
	}
	var claims []claim
	for name, t := range *m {
		l := t.limits.Load()
		for _, b := range []*bucket{l.pushMessages, l.pushBytes, l.popMessages} {
			if b != nil {
				claims = append(claims, claim{name, b})
			}
		}
	}
	return q.leaseFor(ctx, claims)
}

// claim is a tenant's bucket that may want tokens.
type claim struct {
	tenant string
	b      *bucket
}

// leaseFor leases what each claim's bucket wants, in one round trip.
func (q *Quotas) leaseFor(ctx context.Context, claims []claim) error {
	var leases []db.QuotaLease
	for _, c := range claims {
		if want := c.b.want(); want > 0 {
			leases = append(leases, db.QuotaLease{Tenant: c.tenant, Kind: c.b.kind, Want: want, Granted: c.b.credit})
		}
	}
	return q.db.LeaseQuota(ctx, leases)
}
