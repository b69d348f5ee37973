// Package metrics defines the broker's Prometheus metrics, all named regent_*.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/regent-mq/regent/broker/domain/counters"
)

// Metrics is the broker's registry and its collectors. Each broker instance
// has its own registry, so tests can run several brokers in one process.
type Metrics struct {
	Registry *prometheus.Registry

	RequestDuration *prometheus.HistogramVec // route, method, code

	// Per-queue message counters. The streams cycle attributes its sink
	// pushes and source acks here too, since it bypasses the queue routes.
	Pushed *prometheus.CounterVec // tenant, queue
	Popped *prometheus.CounterVec // tenant, queue
	Acked  *prometheus.CounterVec // tenant, queue

	// Ops are the per-minute counts behind the analytics routes, counted
	// where the message counters above are.
	Ops *counters.Counters

	EncryptionFailures prometheus.Counter
	// JWKSFetches counts the fetches of the identity provider's JWK Set.
	JWKSFetches *prometheus.CounterVec // outcome: ok or failed

	PopsParked prometheus.Gauge // long-polls waiting for messages
	// The streams cycles: Cycle counts them; StateOps on commit.
	StreamCycles  *prometheus.CounterVec   // tenant, outcome: committed, deferred, refused or failed
	CycleDuration *prometheus.HistogramVec // outcome
	StateOps      *prometheus.CounterVec   // tenant, type: upsert or delete
	RefusedInARow *prometheus.GaugeVec     // tenant, query: only while its last cycles were refused
	FlushDeferred *prometheus.CounterVec   // tenant, reason: the DETAIL suffix of the rule that deferred it
	queries       *cycling
	// QuotaRefusals counts the requests a tenant quota's limit refused.
	QuotaRefusals *prometheus.CounterVec // tenant, quota
	// DatabaseUp is 1 while PostgreSQL answers: the health check and the lag
	// refresh set it, whichever ran last.
	DatabaseUp prometheus.Gauge
	// SpoolBuffered counts the pushes this replica's spool holds that are
	// not in the database yet (push maintenance, broker/domain/spool).
	SpoolBuffered prometheus.Gauge
	// JoinedRequests and JoinWaiting show natural batching (broker/domain/batch):
	// the requests each database call carried, and those waiting for one.
	JoinedRequests *prometheus.HistogramVec // kind: push
	JoinWaiting    *prometheus.GaugeVec     // kind
}

// Outcomes of a streams cycle, the values of regent_streams_cycles_total's
// outcome label.
const (
	CycleCommitted = "committed" // applied: state, sink pushes and source ack
	CycleDeferred  = "deferred"  // an idle flush answered success=true, nothing applied
	CycleRefused   = "refused"   // answered success=false, nothing applied
	CycleFailed    = "failed"    // Regent's own error, answered 5xx
)

// New registers the Go and process collectors and the broker's own metrics.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Ops:      counters.New(),
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "regent_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern, method and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method", "code"}),
		Pushed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_messages_pushed_total",
			Help: "Messages stored, by push or by a streams cycle's sink emit.",
		}, []string{"tenant", "queue"}),
		Popped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_messages_popped_total",
			Help: "Messages delivered by pops.",
		}, []string{"tenant", "queue"}),
		Acked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_messages_acked_total",
			Help: "Messages acknowledged, by ack or by a streams cycle.",
		}, []string{"tenant", "queue"}),
		QuotaRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_quota_refusals_total",
			Help: "Requests refused by a limit of the tenant's quota, by tenant and limit (its TenantQuota spec field).",
		}, []string{"tenant", "quota"}),
		EncryptionFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regent_encryption_failures_total",
			Help: "Payloads stored in plaintext because sealing them failed.",
		}),
		JWKSFetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_jwks_fetches_total",
			Help: "Fetches of the identity provider's JWK Set (--jwks-url), by outcome: ok, or failed (no answer, or one other than 200). While they fail, tokens of keys the broker has not seen are refused.",
		}, []string{"outcome"}),
		PopsParked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "regent_pops_parked",
			Help: "Long-poll pops waiting for a message (wait=true and nothing to deliver yet).",
		}),
		StreamCycles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_streams_cycles_total",
			Help: "Streams cycles that reached the database, by outcome: committed, deferred (an idle flush of a partition that is not idle), refused or failed.",
		}, []string{"tenant", "outcome"}),
		CycleDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "regent_streams_cycle_duration_seconds",
			Help:    "Streams cycle latency in the broker, from the decoded request to the answer, by outcome.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"outcome"}),
		StateOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_streams_state_ops_total",
			Help: "State rows written by committed streams cycles, by type: upsert or delete (a key's last op in its cycle).",
		}, []string{"tenant", "type"}),
		RefusedInARow: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "regent_streams_query_refused_in_a_row",
			Help: "Cycles of a query this replica refused since its last committed one; the series exists only while there are some.",
		}, []string{"tenant", "query"}),
		FlushDeferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_streams_flush_deferred_total",
			Help: "Idle flushes answered as a success that applied nothing, by reason: leased (a worker holds the partition's lease), unacknowledged (the partition holds messages the group has not acknowledged), gone (a row the flush deletes is gone) or changed (a row it deletes changed since a ripe read returned it).",
		}, []string{"tenant", "reason"}),
		queries: &cycling{last: map[string]time.Time{}, refused: map[string]int{}},
		DatabaseUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "regent_database_up",
			Help: "1 when the last health check or lag refresh reached PostgreSQL, 0 when it failed.",
		}),
		SpoolBuffered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "regent_spool_buffered_messages",
			Help: "Pushes this replica spooled during push maintenance that are not in the database yet.",
		}),
		JoinedRequests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "regent_joined_requests",
			Help:    "Requests per database call of natural batching, by kind (push): those that waited while the calls before were in flight go in one.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}, []string{"kind"}),
		JoinWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "regent_join_waiting",
			Help: "Requests waiting for the database calls of their kind (push) in flight to finish.",
		}, []string{"kind"}),
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.RequestDuration, m.Pushed, m.Popped, m.Acked, m.EncryptionFailures, m.JWKSFetches,
		m.PopsParked, m.StreamCycles, m.QuotaRefusals, m.DatabaseUp, m.SpoolBuffered,
		m.JoinedRequests, m.JoinWaiting, m.CycleDuration, m.StateOps, m.RefusedInARow, m.FlushDeferred,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "regent_streams_active_queries",
			Help: "Queries that sent this replica a cycle in the last minute.",
		}, m.queries.active),
	)
	// Both outcomes exist from the start, at 0, so that an alert on them
	// has a series to read before the first failure.
	for _, o := range []string{"ok", "failed"} {
		m.JWKSFetches.WithLabelValues(o)
	}
	return m
}

// ActiveFor is how recent a query's last cycle must be for it to count as
// active.
const ActiveFor = time.Minute

// cycling is what the streams metrics remember of each query: when it last
// cycled, and how many of its cycles were refused since one committed.
type cycling struct {
	mu      sync.Mutex
	last    map[string]time.Time // tenant/query
	refused map[string]int
}

// active counts the queries that cycled within ActiveFor, forgetting the
// others: the map holds no more than the queries of the last minute.
func (c *cycling) active() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	cutoff := time.Now().Add(-ActiveFor)
	for k, at := range c.last {
		if at.Before(cutoff) {
			delete(c.last, k)
		}
	}
	return float64(len(c.last))
}

// Cycle records a streams cycle of the query that ended with outcome after
// took. A refusal lengthens the query's run of refusals; a commit ends it and
// drops its series, so that the gauge names only the queries refused now.
func (m *Metrics) Cycle(tenant, query, outcome string, took time.Duration) {
	m.StreamCycles.WithLabelValues(tenant, outcome).Inc()
	m.CycleDuration.WithLabelValues(outcome).Observe(took.Seconds())
	key := tenant + "/" + query
	c := m.queries
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[key] = time.Now()
	switch outcome {
	case CycleRefused:
		c.refused[key]++
		m.RefusedInARow.WithLabelValues(tenant, query).Set(float64(c.refused[key]))
	case CycleCommitted:
		if _, ok := c.refused[key]; ok {
			delete(c.refused, key)
			m.RefusedInARow.DeleteLabelValues(tenant, query)
		}
	}
}
