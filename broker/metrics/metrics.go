// Package metrics defines the broker's Prometheus metrics, all named regent_*.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/regent-mq/regent/broker/counters"
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

	PopsParked   prometheus.Gauge       // long-polls waiting for messages
	StreamCycles *prometheus.CounterVec // tenant, result: committed, refused or failed
	// QuotaRefusals counts the requests a tenant quota's limit refused.
	QuotaRefusals *prometheus.CounterVec // tenant, quota
	// DatabaseUp is 1 while PostgreSQL answers: the health check and the lag
	// refresh set it, whichever ran last.
	DatabaseUp prometheus.Gauge
	// SpoolBuffered counts the pushes this replica's spool holds that are
	// not in the database yet (push maintenance, broker/spool).
	SpoolBuffered prometheus.Gauge
	// JoinedRequests and JoinWaiting show natural batching (broker/batch):
	// the requests each database call carried, and those waiting for one.
	JoinedRequests *prometheus.HistogramVec // kind: push
	JoinWaiting    *prometheus.GaugeVec     // kind
}

// Results of a streams cycle, the values of regent_stream_cycles_total's
// result label.
const (
	CycleCommitted = "committed" // applied: state, sink pushes and source ack
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
		PopsParked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "regent_pops_parked",
			Help: "Long-poll pops waiting for a message (wait=true and nothing to deliver yet).",
		}),
		StreamCycles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regent_stream_cycles_total",
			Help: "Streams cycles that reached the database, by result: committed, refused or failed.",
		}, []string{"tenant", "result"}),
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
		m.RequestDuration, m.Pushed, m.Popped, m.Acked, m.EncryptionFailures,
		m.PopsParked, m.StreamCycles, m.QuotaRefusals, m.DatabaseUp, m.SpoolBuffered,
		m.JoinedRequests, m.JoinWaiting,
	)
	return m
}
