package streamworker

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a worker's regent_worker_* series. Event and window counts
// move only when their cycle commits, so a refused cycle counts nothing.
type Metrics struct {
	eventsIn, filtered, late, failed, emitted prometheus.Counter
	deferred, stateReads                      prometheus.Counter
	cycles, refused                           *prometheus.CounterVec
	cycleSeconds                              *prometheus.HistogramVec
}

// NewMetrics makes the series and registers them with reg (none when nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "regent_worker_" + name, Help: help})
	}
	m := &Metrics{
		eventsIn:   counter("events_in_total", "Source events folded by committed cycles."),
		filtered:   counter("events_filtered_total", "Events the filter skipped."),
		late:       counter("events_late_total", "Events whose windows had all closed (dropped, or pushed to the late queue)."),
		failed:     counter("events_failed_total", "Events and windows dropped because an expression failed on them (an error, or the cost limit)."),
		emitted:    counter("windows_emitted_total", "Outputs pushed to the sink: closed windows, or a stateless pipeline's events."),
		deferred:   counter("flushes_deferred_total", "Idle flushes the broker answered deferred (the partition was not idle): nothing applied, the windows wait for the next."),
		stateReads: counter("state_reads_total", "Reads of a partition's state (state/get). A fold under a kept lease reads none: it folds into the state its last cycle left."),
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "regent_worker_cycles_total",
			Help: "Committed cycles, by kind: fold (a batch and its ack) or flush (an idle flush)."}, []string{"kind"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "regent_worker_cycles_refused_total",
			Help: "Cycles the broker refused (a lease gone, or a row changed since it was read), by kind."}, []string{"kind"}),
		cycleSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "regent_worker_cycle_seconds",
			Help: "Latency of the cycle call, by kind.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.eventsIn, m.filtered, m.late, m.failed, m.emitted, m.deferred, m.stateReads, m.cycles, m.refused, m.cycleSeconds)
	}
	return m
}
