package admin

import (
	"context"
	"sync"
	"time"

	"github.com/regent-mq/regent/broker/pg/db"
)

// The lifetime counters of status and overview are the sum of every minute
// queue_minutes keeps: 90 days of every queue and replica, too many rows to
// sum on every poll of a dashboard. Minutes older than settleAfter no longer
// change (each replica flushes every few seconds), so each tenant's sum of
// them is kept, and extended as minutes settle; a request sums only the
// minutes since. The kept sum is made afresh every rescanEvery, which picks
// up what the retention sweep deleted and any flush that came later than
// settleAfter (a replica cut off from the database that long).
const (
	settleAfter = 15 * time.Minute
	rescanEvery = time.Hour
)

// settled is a tenant's counters summed over the minutes before until.
type settled struct {
	until, scanned time.Time
	sum            db.QueueMinutes
}

// lifetimes keeps each tenant's settled sum. Safe for concurrent use.
type lifetimes struct {
	mu       sync.Mutex
	byTenant map[string]settled
}

// get is the tenant's counters summed over every minute kept, as of now.
// Cost: one range scan of queue_minutes' primary key over the last
// settleAfter; once a minute one over the minute that settled, and once an
// hour one over every minute kept.
func (l *lifetimes) get(ctx context.Context, st *db.DB, tenant string, now time.Time) (db.QueueMinutes, error) {
	cut := now.Truncate(time.Minute).Add(-settleAfter)
	beforeCut := cut.Add(-time.Microsecond) // the settled minutes end before cut
	l.mu.Lock()
	s, ok := l.byTenant[tenant]
	l.mu.Unlock()
	switch {
	case !ok || now.Sub(s.scanned) >= rescanEvery:
		sum, err := sumMinutes(ctx, st, tenant, epoch, beforeCut)
		if err != nil {
			return sum, err
		}
		s = settled{until: cut, scanned: now, sum: sum}
	case s.until.Before(cut):
		more, err := sumMinutes(ctx, st, tenant, s.until, beforeCut)
		if err != nil {
			return more, err
		}
		s.until, s.sum = cut, add(s.sum, more)
	}
	l.mu.Lock()
	if l.byTenant == nil {
		l.byTenant = map[string]settled{}
	}
	if old, ok := l.byTenant[tenant]; !ok || s.scanned.After(old.scanned) || s.until.After(old.until) {
		l.byTenant[tenant] = s
	}
	l.mu.Unlock()
	recent, err := sumMinutes(ctx, st, tenant, cut, now)
	if err != nil {
		return recent, err
	}
	return add(s.sum, recent), nil
}

// epoch is where buckets are counted from (§5).
var epoch = time.Unix(0, 0)

// sumMinutes sums the tenant's counters of the minutes from the minute of
// from to to: the window's single bucket starts at the epoch and ends
// after to.
func sumMinutes(ctx context.Context, st *db.DB, tenant string, from, to time.Time) (db.QueueMinutes, error) {
	rows, err := st.QueueMinutes(ctx, tenant, db.Window{From: from, To: to, Width: to.Sub(epoch) + time.Minute, AcrossQueues: true})
	if err != nil || len(rows) == 0 {
		return db.QueueMinutes{}, err
	}
	return rows[0], nil
}

// add sums two sums of counters.
func add(a, b db.QueueMinutes) db.QueueMinutes {
	_, sums := rollup([]db.QueueMinutes{a, b}, func(db.QueueMinutes) bool { return true })
	return *sums[true]
}
