// Package quota enforces the limits a TenantQuota grants a tenant beyond
// its query cap (issue 18), so that one tenant cannot starve its neighbours
// on a shared broker: push and pop rates, the bytes its queues store, and
// (in the database, where they are exact) its queue and state-row caps.
//
// The hot paths never wait on the database for a check. Every replica keeps
// the limits in memory, re-read every second and at once on a NOTIFY
// regent_quota (as broker/domain/flags does for the switches); a tenant without a
// quota row, and the default tenant always, costs one map lookup and
// nothing else.
//
// Rates across replicas: each limited rate is a token bucket in PostgreSQL
// (queen_streams.quota_budget), refilled at the rate up to the burst. A
// replica leases tokens from it in slices of a tenth of a second's worth
// (queen_streams.quota_lease), in the background, whenever its local
// holding runs low; a push spends from the local holding and is refused at
// once when it does not cover the request. The replicas therefore spend at
// most burst + rate x time together, whatever their number, and a replica
// that stops serving the tenant strands at most two slices.
//
// Stored bytes: the partitions' stored_bytes counters, which the push and
// retention keep, summed per tenant on every re-read; a replica adds its own
// pushes in between, so the other replicas' pushes of the last second are
// what the check can miss. Pushes and a cycle's sink emits are checked; the
// rates apply to pushes (the route and transactions), not to sink emits. maxQueues (queen.queue_admit) and maxStateRows
// (queen_streams.state_rows_add) are checked in the transaction that creates
// the queue or the state rows, under the quota row's lock: exact.
//
// Every refusal counts in regent_quota_refusals_total{tenant,quota}, and
// once a second a replica records which limits refused whom, and how much
// it pushed and popped for each limited tenant (queen_streams.quota_record),
// for the operator's TenantQuota status.
package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regent-mq/regent/broker/pg/db"
)

// The limits, by their TenantQuota spec field: the "quota" of a refusal and
// the label of regent_quota_refusals_total.
const (
	MaxQueues      = "maxQueues"
	PushMessages   = "push.messagesPerSecond"
	PushBytes      = "push.bytesPerSecond"
	PopMessages    = "pop.messagesPerSecond"
	MaxStoredBytes = "maxStoredBytes"
	MaxStateRows   = "maxStateRows"
)

// Channel is the NOTIFY channel of a changed quota row
// (queen_streams.quota_apply_v2, quota_delete).
const Channel = "regent_quota"

// Reread is how often a replica re-reads the limits and the stored bytes,
// and records what it saw.
const Reread = time.Second

// Refusal is a request a limit refused, whose body names the limit and the
// tenant.
type Refusal struct {
	Tenant, Quota, Message string
	// TooLarge is a request larger than its rate's burst: no wait can let
	// it through.
	TooLarge bool
}

func (r *Refusal) Error() string { return r.Message }

// Quotas is this replica's view of every tenant's limits. A nil *Quotas
// limits nothing. It is safe for concurrent use.
type Quotas struct {
	db       Store
	log      *slog.Logger
	refusals *prometheus.CounterVec
	tenants  atomic.Pointer[map[string]*tenant]
	kick     chan struct{}
}

// Store is where the limits and the cluster's buckets live: broker/pg/db.
type Store interface {
	QuotaLimits(ctx context.Context) ([]db.TenantLimits, error)
	RecordQuotaUsage(ctx context.Context, u db.QuotaUsage) error
	LeaseQuota(ctx context.Context, leases []db.QuotaLease) error
	Listen(ctx context.Context, channel string, retry time.Duration, log *slog.Logger, what string, heard func(context.Context))
}

var _ Store = (*db.DB)(nil)

// New returns Quotas reading through d, limiting nothing until the first
// read; refusals count in refusals (tenant, quota).
func New(d Store, refusals *prometheus.CounterVec, log *slog.Logger) *Quotas {
	return &Quotas{db: d, log: log, refusals: refusals, kick: make(chan struct{}, 1)}
}

// tenant is one limited tenant. Its limits are replaced whole when the row
// changes; the counters stay.
type tenant struct {
	name   string
	limits atomic.Pointer[limits]
	// stored is the tenant's stored bytes as last read, plus this replica's
	// pushes since.
	stored atomic.Int64
	// pushed and popped are the messages since the last record.
	pushed, popped atomic.Int64
	// refused holds the limits that refused since the last record.
	refusedMu sync.Mutex
	refused   map[string]bool
}

type limits struct {
	pushMessages, pushBytes, popMessages *bucket // nil: no limit
	maxStored                            int64   // < 0: no limit
}

func (q *Quotas) lookup(name string) *tenant {
	if q == nil {
		return nil
	}
	if m := q.tenants.Load(); m != nil {
		return (*m)[name]
	}
	return nil
}

// AdmitPush checks a push of messages whose packed segments hold bytes
// against the tenant's limits, and spends its share of the rates. A
// *Refusal means the push must store nothing.
func (q *Quotas) AdmitPush(name string, messages int, bytes int64) error {
	t := q.lookup(name)
	if t == nil {
		return nil
	}
	l := t.limits.Load()
	if err := q.storable(t, l, bytes); err != nil {
		return err
	}
	if !q.spend(l.pushMessages, int64(messages)) {
		return q.refuseRate(t, PushMessages, l.pushMessages, int64(messages), "messages")
	}
	if !q.spend(l.pushBytes, bytes) {
		l.pushMessages.refund(int64(messages))
		return q.refuseRate(t, PushBytes, l.pushBytes, bytes, "bytes")
	}
	t.stored.Add(bytes)
	t.pushed.Add(int64(messages))
	return nil
}

// AdmitStore checks bytes more in the tenant's queues against its
// maxStoredBytes: the sink emits of a cycle, which the push rates leave
// alone (the cycle's source was pushed under them).
func (q *Quotas) AdmitStore(name string, bytes int64) error {
	t := q.lookup(name)
	if t == nil {
		return nil
	}
	if err := q.storable(t, t.limits.Load(), bytes); err != nil {
		return err
	}
	t.stored.Add(bytes)
	return nil
}

func (q *Quotas) storable(t *tenant, l *limits, bytes int64) error {
	if l.maxStored >= 0 && t.stored.Load()+bytes > l.maxStored {
		return q.refuse(t, MaxStoredBytes, fmt.Sprintf("quota maxStoredBytes: tenant %q stores %d bytes of its cap of %d; %d bytes more would pass it",
			t.name, t.stored.Load(), l.maxStored, bytes))
	}
	return nil
}

// AdmitPop checks that the tenant may pop now: a pop is refused while the
// tenant's pop rate is spent (and its debt unpaid). Popped settles the bill.
func (q *Quotas) AdmitPop(name string) error {
	t := q.lookup(name)
	if t == nil {
		return nil
	}
	if b := t.limits.Load().popMessages; b != nil && !q.spend(b, 0) {
		return q.refuseRate(t, PopMessages, b, 1, "messages")
	}
	return nil
}

// Popped spends n delivered messages of the tenant's pop rate; the holding
// can go into debt, which the next leases pay off before a pop passes again.
func (q *Quotas) Popped(name string, n int) {
	t := q.lookup(name)
	if t == nil || n == 0 {
		return
	}
	if b := t.limits.Load().popMessages; b != nil {
		b.debit(int64(n))
		q.wake()
	}
	t.popped.Add(int64(n))
}

// FromSQL turns a refusal that a limit checked in the database raised
// (maxQueues, maxStateRows) into a *Refusal of the tenant, counted and
// recorded; any other error is returned as it is.
func (q *Quotas) FromSQL(name string, err error) error {
	r, ok := db.Refusal(err)
	if !ok {
		return err
	}
	if quota := InSQL(r.Code); quota != "" {
		return q.Refused(name, quota, r.Message)
	}
	return err
}

// InSQL returns the limit whose check in the database refused, from the
// refusal's code ("quota.maxStateRows"); "" for another refusal.
func InSQL(code string) string {
	quota, ok := strings.CutPrefix(code, "quota.")
	if ok && (quota == MaxQueues || quota == MaxStateRows) {
		return quota
	}
	return ""
}

// Refused counts and records a refusal of the tenant by a limit checked
// elsewhere (the database's), and returns it.
func (q *Quotas) Refused(name, quota, msg string) *Refusal {
	t := q.lookup(name)
	if t == nil {
		// Not read yet: counted, but recorded with the next refusal only.
		t = &tenant{name: name}
	}
	return q.refuse(t, quota, msg)
}

// IsRefusal reports whether err is a refusal by a limit.
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

func (q *Quotas) refuse(t *tenant, quota, msg string) *Refusal {
	if q == nil {
		return &Refusal{Tenant: t.name, Quota: quota, Message: msg}
	}
	q.refusals.WithLabelValues(t.name, quota).Inc()
	t.refusedMu.Lock()
	if t.refused == nil {
		t.refused = map[string]bool{}
	}
	t.refused[quota] = true
	t.refusedMu.Unlock()
	return &Refusal{Tenant: t.name, Quota: quota, Message: msg}
}

// refuseRate refuses a request of n units that the rate's bucket b did not
// cover.
func (q *Quotas) refuseRate(t *tenant, quota string, b *bucket, n int64, unit string) *Refusal {
	if n > b.burst {
		r := q.refuse(t, quota, fmt.Sprintf("quota %s: a request of %d %s is larger than tenant %q's burst of %d, so no retry can pass; split it",
			quota, n, unit, t.name, b.burst))
		r.TooLarge = true
		return r
	}
	return q.refuse(t, quota, fmt.Sprintf("quota %s: tenant %q is over its rate of %d %s per second; retry later", quota, t.name, b.rate, unit))
}

// spend takes n tokens from b (nil: no limit), and asks for a lease when the
// holding runs low.
func (q *Quotas) spend(b *bucket, n int64) bool {
	if b == nil {
		return true
	}
	ok, low := b.take(n)
	if low {
		q.wake()
	}
	return ok
}

func (q *Quotas) wake() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Run keeps the limits current and records usage until ctx ends: a re-read
// and a record every Reread, the first at once. Listen and Lease are its
// two other loops.
func (q *Quotas) Run(ctx context.Context) {
	t := time.NewTicker(Reread)
	defer t.Stop()
	for {
		q.reread(ctx)
		if err := q.Record(ctx); err != nil && ctx.Err() == nil {
			q.log.Warn("quota: record usage failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Listen re-reads the limits on every NOTIFY on Channel until ctx ends, from
// a connection of its own.
func (q *Quotas) Listen(ctx context.Context) {
	q.db.Listen(ctx, Channel, Reread, q.log, "quota", q.reread)
}

func (q *Quotas) reread(ctx context.Context) {
	if err := q.Read(ctx); err != nil && ctx.Err() == nil {
		q.log.Warn("quota: re-read of the limits failed", "err", err)
	}
}

// Read reads every tenant's limits and stored bytes, and installs them.
func (q *Quotas) Read(ctx context.Context) error {
	read, err := q.db.QuotaLimits(ctx)
	if err != nil {
		return err
	}
	var old map[string]*tenant
	if m := q.tenants.Load(); m != nil {
		old = *m
	}
	next := make(map[string]*tenant, len(read))
	var fresh []claim
	for _, x := range read {
		t := old[x.Tenant]
		if t == nil {
			t = &tenant{name: x.Tenant}
		}
		var was limits
		if l := t.limits.Load(); l != nil {
			was = *l
		}
		l := &limits{
			pushMessages: was.pushMessages.resized("push_messages", x.PushMessagesPerSecond, x.PushMessagesBurst),
			pushBytes:    was.pushBytes.resized("push_bytes", x.PushBytesPerSecond, x.PushBytesBurst),
			popMessages:  was.popMessages.resized("pop_messages", x.PopMessagesPerSecond, nil),
			maxStored:    -1,
		}
		for _, nb := range [][2]*bucket{{was.pushMessages, l.pushMessages}, {was.pushBytes, l.pushBytes}, {was.popMessages, l.popMessages}} {
			if nb[1] != nil && nb[1] != nb[0] {
				fresh = append(fresh, claim{x.Tenant, nb[1]})
			}
		}
		if x.MaxStoredBytes != nil {
			l.maxStored = *x.MaxStoredBytes
			t.stored.Store(*x.Stored)
		}
		t.limits.Store(l)
		next[x.Tenant] = t
	}
	// A new bucket holds its first slices before it is used, so that a
	// push is never refused for a lease that has not happened yet.
	err = q.leaseFor(ctx, fresh)
	q.tenants.Store(&next)
	return err
}

// Record writes what this replica pushed and popped for each limited
// tenant, and which limits refused whom, since its last call.
func (q *Quotas) Record(ctx context.Context) error {
	m := q.tenants.Load()
	if m == nil {
		return nil
	}
	var u db.QuotaUsage
	for name, t := range *m {
		if p, o := t.pushed.Swap(0), t.popped.Swap(0); p != 0 || o != 0 {
			u.Tenants, u.Pushed, u.Popped = append(u.Tenants, name), append(u.Pushed, p), append(u.Popped, o)
		}
		t.refusedMu.Lock()
		for quota := range t.refused {
			u.RefusedTenants, u.RefusedQuotas = append(u.RefusedTenants, name), append(u.RefusedQuotas, quota)
		}
		t.refused = nil
		t.refusedMu.Unlock()
	}
	if len(u.Tenants) == 0 && len(u.RefusedTenants) == 0 {
		return nil
	}
	return q.db.RecordQuotaUsage(ctx, u)
}
