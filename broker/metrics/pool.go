package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PoolStats are the figures the database pool keeps of itself (broker/pg/db),
// read without a query.
type PoolStats struct {
	MaxConns, TotalConns, AcquiredConns, IdleConns, ConstructingConns int64
	Acquires, EmptyAcquires, CanceledAcquires, NewConns               int64
	AcquireWait                                                       time.Duration
}

// Pool is a database pool whose figures are exported.
type Pool interface{ PoolStats() PoolStats }

// poolCollector reads the pool's figures at scrape time: they are counters
// and gauges the pool already keeps, so a scrape costs no query.
type poolCollector struct {
	pool  Pool
	descs []poolDesc
}

type poolDesc struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*PoolStats) float64
}

// WatchPool exports the pool's figures as regent_db_pool_*.
func (m *Metrics) WatchPool(pool Pool) {
	d := func(name, help string, kind prometheus.ValueType, v func(*PoolStats) float64) poolDesc {
		return poolDesc{prometheus.NewDesc("regent_db_pool_"+name, help, nil, nil), kind, v}
	}
	g, c := prometheus.GaugeValue, prometheus.CounterValue
	m.Registry.MustRegister(&poolCollector{pool: pool, descs: []poolDesc{
		d("max_conns", "Largest number of connections the pool opens (--pool-size).", g,
			func(s *PoolStats) float64 { return float64(s.MaxConns) }),
		d("total_conns", "Connections open now: acquired, idle and being opened.", g,
			func(s *PoolStats) float64 { return float64(s.TotalConns) }),
		d("acquired_conns", "Connections in use by a request or background task now.", g,
			func(s *PoolStats) float64 { return float64(s.AcquiredConns) }),
		d("idle_conns", "Open connections waiting to be acquired.", g,
			func(s *PoolStats) float64 { return float64(s.IdleConns) }),
		d("constructing_conns", "Connections being opened now.", g,
			func(s *PoolStats) float64 { return float64(s.ConstructingConns) }),
		d("acquires_total", "Connections acquired from the pool.", c,
			func(s *PoolStats) float64 { return float64(s.Acquires) }),
		d("empty_acquires_total", "Acquires that had to wait because no connection was idle: the sign of a pool too small.", c,
			func(s *PoolStats) float64 { return float64(s.EmptyAcquires) }),
		d("canceled_acquires_total", "Acquires abandoned because their context ended while waiting.", c,
			func(s *PoolStats) float64 { return float64(s.CanceledAcquires) }),
		d("acquire_wait_seconds_total", "Time spent acquiring connections, summed.", c,
			func(s *PoolStats) float64 { return s.AcquireWait.Seconds() }),
		d("new_conns_total", "Connections opened.", c,
			func(s *PoolStats) float64 { return float64(s.NewConns) }),
	}})
}

func (p *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range p.descs {
		ch <- d.desc
	}
}

func (p *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := p.pool.PoolStats()
	for _, d := range p.descs {
		ch <- prometheus.MustNewConstMetric(d.desc, d.kind, d.value(&s))
	}
}
