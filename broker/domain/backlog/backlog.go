// Package backlog measures what waits in the database: how far each consumer
// group is behind on each queue (regent_consumer_group_lag and
// regent_consumer_group_oldest_unconsumed_age_seconds, the metrics workers
// are scaled and paged on) and the dead letters of each queue
// (regent_dead_letters).
//
// Two queries (db.Backlog) refresh everything in the background; scrapes are served from
// the last result, so a scrape never touches the database, and however often
// Prometheus (or several of them) scrape, the database sees two queries per
// interval per broker replica. The first refresh of each minute also writes
// the groups' lag to queen.group_minutes, the history the console charts.
package backlog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/db"
)

var (
	labels  = []string{"tenant", "queue", "group"}
	lagDesc = prometheus.NewDesc("regent_consumer_group_lag",
		"Messages pushed to the queue and not yet consumed by the group: per partition the next offset minus the group's committed offset, summed.",
		labels, nil)
	ageDesc = prometheus.NewDesc("regent_consumer_group_oldest_unconsumed_age_seconds",
		"Age of the oldest message the group has not consumed on the queue; 0 when it is caught up.",
		labels, nil)
	deadDesc = prometheus.NewDesc("regent_dead_letters",
		"Dead letters the queue holds now, over its consumer groups.",
		[]string{"tenant", "queue"}, nil)
)

// Collector keeps the last refresh and serves it to scrapes. A group whose
// cursors are gone (its queue deleted) disappears with the next refresh.
type Collector struct {
	db  *db.DB
	m   *metrics.Metrics
	log *slog.Logger

	mu       sync.Mutex
	last     db.Backlog
	recorded time.Time // the minute whose sample went to queen.group_minutes
}

// New registers the collector on m's registry; Run keeps it fresh.
func New(store *db.DB, m *metrics.Metrics, log *slog.Logger) *Collector {
	c := &Collector{db: store, m: m, log: log}
	m.Registry.MustRegister(c)
	return c
}

// Run refreshes at once, then every interval until ctx ends. A failed
// refresh keeps the last values (a lag that stops moving is less wrong
// than one that vanishes) and sets regent_database_up to 0.
func (c *Collector) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		c.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh reads the backlog once and reports whether it could.
func (c *Collector) Refresh(ctx context.Context) bool {
	s, err := c.db.Backlog(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("backlog refresh failed", "err", err)
			c.m.DatabaseUp.Set(0)
		}
		return false
	}
	c.m.DatabaseUp.Set(1)
	c.mu.Lock()
	c.last = s
	c.mu.Unlock()
	// The first refresh of each minute is its sample in the charts'
	// history; losing one leaves a gap, so it is only logged.
	now := time.Now().Truncate(time.Minute)
	c.mu.Lock()
	due := now.After(c.recorded)
	c.mu.Unlock()
	if !due {
		return true
	}
	if err := c.db.RecordGroupMinutes(ctx, now, s.Groups); err != nil {
		if ctx.Err() == nil {
			c.log.Warn("record the groups' lag for the charts", "err", err)
		}
		return true
	}
	c.mu.Lock()
	c.recorded = now
	c.mu.Unlock()
	return true
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lagDesc
	ch <- ageDesc
	ch <- deadDesc
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.last.Groups {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(g.Lag), g.Tenant, g.Queue, g.Group)
		ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, g.OldestAgeSeconds, g.Tenant, g.Queue, g.Group)
	}
	for _, d := range c.last.DeadLetters {
		ch <- prometheus.MustNewConstMetric(deadDesc, prometheus.GaugeValue, float64(d.Count), d.Tenant, d.Queue)
	}
}
