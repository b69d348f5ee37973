// Package metrics defines the broker's Prometheus metrics, all named regent_*.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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

	EncryptionFailures prometheus.Counter
}

// New registers the Go and process collectors and the broker's own metrics.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
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
		EncryptionFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "regent_encryption_failures_total",
			Help: "Payloads stored in plaintext because sealing them failed.",
		}),
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.RequestDuration, m.Pushed, m.Popped, m.Acked, m.EncryptionFailures,
	)
	return m
}
