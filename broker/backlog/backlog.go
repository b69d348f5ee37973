// Package backlog measures what waits in the database: how far each consumer
// group is behind on each queue (regent_consumer_group_lag and
// regent_consumer_group_oldest_unconsumed_age_seconds, the metrics workers
// are scaled and paged on) and the dead letters of each queue
// (regent_dead_letters).
//
// Two queries refresh everything in the background; scrapes are served from
// the last result, so a scrape never touches the database, and however often
// Prometheus (or several of them) scrape, the database sees two queries per
// interval per broker replica.
package backlog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/regent-mq/regent/broker/metrics"
)

// groupsSQL reads every cursor with its partition's next offset, and, for a
// cursor that is behind, the creation time of the segment holding its first
// unconsumed offset.
//
// Cost, per refresh: one statement. It scans queen.cursors once (one row per
// partition and group, never per message), joins each row to its partition
// and queue by primary key (or a hash join over both small tables), and, for
// each cursor that is behind, probes queen.log_segments' primary key
// (partition_id, base_offset) at most twice: the last segment that starts at
// or before the cursor, and, when retention removed the one holding it, the
// first after. No segment body is read.
//
// The lag counts offsets, so offsets that retention deleted before the group
// read them still count, as they do for Queen. The age is that of the oldest
// frame of the segment holding the first unconsumed offset: when the group
// stopped inside a push request's segment, it overstates by at most the time
// that one push spanned.
const groupsSQL = `
SELECT q.tenant, q.name, c.consumer_group,
       sum(p.next_offset - c.committed)::bigint,
       coalesce(extract(epoch FROM now() - min(s.min_created_at)), 0)::float8
  FROM queen.cursors c
  JOIN queen.partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
  LEFT JOIN LATERAL (
        SELECT x.min_created_at FROM (
            (SELECT base_offset, frame_count, min_created_at FROM queen.log_segments
              WHERE partition_id = c.partition_id AND base_offset <= c.committed
              ORDER BY base_offset DESC LIMIT 1)
            UNION ALL
            (SELECT base_offset, frame_count, min_created_at FROM queen.log_segments
              WHERE partition_id = c.partition_id AND base_offset > c.committed
              ORDER BY base_offset LIMIT 1)
        ) x
         WHERE x.base_offset + x.frame_count > c.committed
         ORDER BY x.base_offset LIMIT 1
       ) s ON c.committed < p.next_offset
 GROUP BY q.tenant, q.name, c.consumer_group`

// deadLettersSQL counts the dead letters of each queue. Cost: one pass over
// queen.dead_letters, an index-only scan of its primary key where the
// visibility map allows. Dead letters are the exceptions a team inspects and
// clears, so the table stays small next to the log.
const deadLettersSQL = `
SELECT q.tenant, q.name, count(*)
  FROM queen.dead_letters d
  JOIN queen.partitions p ON p.id = d.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 GROUP BY q.tenant, q.name`

// Group is one consumer group's position on one queue.
type Group struct {
	Tenant, Queue, Group string
	Lag                  int64   // offsets pushed and not yet consumed, over the queue's partitions
	OldestAgeSeconds     float64 // age of the oldest unconsumed message; 0 when caught up
}

// DeadLetters is the number of dead letters of one queue.
type DeadLetters struct {
	Tenant, Queue string
	Count         int64
}

// Snapshot is one refresh.
type Snapshot struct {
	Groups      []Group
	DeadLetters []DeadLetters
}

// Read runs both queries once.
func Read(ctx context.Context, pool *pgxpool.Pool) (Snapshot, error) {
	var s Snapshot
	var err error
	s.Groups, err = query(ctx, pool, groupsSQL, "consumer group lag", func(r pgx.CollectableRow) (g Group, err error) {
		return g, r.Scan(&g.Tenant, &g.Queue, &g.Group, &g.Lag, &g.OldestAgeSeconds)
	})
	if err != nil {
		return s, err
	}
	s.DeadLetters, err = query(ctx, pool, deadLettersSQL, "dead letters", func(r pgx.CollectableRow) (d DeadLetters, err error) {
		return d, r.Scan(&d.Tenant, &d.Queue, &d.Count)
	})
	return s, err
}

func query[T any](ctx context.Context, pool *pgxpool.Pool, sql, what string, scan pgx.RowToFunc[T]) ([]T, error) {
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return out, nil
}

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
	pool *pgxpool.Pool
	m    *metrics.Metrics
	log  *slog.Logger

	mu   sync.Mutex
	last Snapshot
}

// New registers the collector on m's registry; Run keeps it fresh.
func New(pool *pgxpool.Pool, m *metrics.Metrics, log *slog.Logger) *Collector {
	c := &Collector{pool: pool, m: m, log: log}
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
	s, err := Read(ctx, c.pool)
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
