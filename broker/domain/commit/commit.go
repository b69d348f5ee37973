// Package commit is what a write leaves to do once it has committed: the
// partitions it made deliverable, and the counts it adds to the metrics
// and the analytics minutes. A write returns it as an After, built from
// what the database answered; its caller applies it (Applier.Apply) when,
// and only when, the write's transaction has committed, so that nothing is
// announced or counted for a write that rolled back, and the one place
// that does that work is Apply.
package commit

import (
	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/broker/metrics"
)

// Partition names a partition of a queue.
type Partition struct{ Queue, Partition uuid.UUID }

// Op is a count for a queue's analytics minute.
type Op struct {
	Tenant, Queue string
	Field         counters.Field
	N             int64
}

// Count is a number of messages of a queue, for the Prometheus counters.
type Count struct {
	Tenant, Queue string
	N             int
}

// After is what a committed write leaves to do.
type After struct {
	// Announce are the partitions with data to deliver: marked in this
	// replica's hot list at once and told to every other replica.
	Announce []Partition
	// Mark are partitions whose lease a consumer released with nothing
	// new in them: marked in this replica's hot list only, since the
	// consumer that released it usually pops again at once.
	Mark []Partition
	// Ops are the analytics counts.
	Ops []Op
	// Pushed and Acked are the messages stored and acknowledged.
	Pushed, Acked []Count
}

// Add appends b's work to a's.
func (a *After) Add(b After) {
	a.Announce = append(a.Announce, b.Announce...)
	a.Mark = append(a.Mark, b.Mark...)
	a.Ops = append(a.Ops, b.Ops...)
	a.Pushed = append(a.Pushed, b.Pushed...)
	a.Acked = append(a.Acked, b.Acked...)
}

// Applier does what committed writes leave to do.
type Applier struct {
	announcer *hotlist.Announcer
	hot       *hotlist.List
	metrics   *metrics.Metrics
}

// New returns an Applier that announces through announcer, marks hot, and
// counts in m.
func New(announcer *hotlist.Announcer, hot *hotlist.List, m *metrics.Metrics) *Applier {
	return &Applier{announcer: announcer, hot: hot, metrics: m}
}

// Apply does a's work. Call it once the write that returned a has
// committed.
func (x *Applier) Apply(a After) {
	for _, p := range a.Announce {
		x.announcer.Announce(p.Queue, p.Partition)
	}
	for _, p := range a.Mark {
		x.hot.Mark(p.Queue, p.Partition)
	}
	for _, o := range a.Ops {
		x.metrics.Ops.Add(o.Tenant, o.Queue, o.Field, o.N)
	}
	for _, c := range a.Pushed {
		x.metrics.Pushed.WithLabelValues(c.Tenant, c.Queue).Add(float64(c.N))
	}
	for _, c := range a.Acked {
		x.metrics.Acked.WithLabelValues(c.Tenant, c.Queue).Add(float64(c.N))
	}
}
