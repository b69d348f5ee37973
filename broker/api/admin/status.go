package admin

import (
	"net/http"
	"slices"
	"time"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/pg/db"
)

// The status routes (queue-admin-api.md §4, but /status/analytics) count
// as the resources routes do. The time series of GET /api/v1/status comes
// from the per-minute counters (broker/domain/counters, queen.queue_minutes) and
// the replicas' once-a-minute samples (queen.replica_samples), never from
// the log.

// maxBuckets bounds the series of one request: a range of years in 6-hour
// buckets is still a few thousand.
const maxBuckets = 10000

// liveFor is how recently a replica must have sampled itself to count as a
// worker (§4: the last 2 minutes).
const liveFor = 2 * time.Minute

// handleStatus is GET /api/v1/status. Cost: seven round trips, nine
// statements. The queues with their counts and the overview (each one
// statement over the tenant's partitions, cursors and dead letters, as the
// resources routes); the live leases (cursors_lease_idx) and dead letters
// (a batch of three); two range scans of queue_minutes' primary key
// (tenant, minute): the window's, summed over queues by bucket, and the
// last 15 minutes of the lifetime totals (lifetimes.get); and
// two range scans of replica_samples' primary key (minute, replica), the
// window's and the last 2 minutes'.
func (a *API) handleStatus(w http.ResponseWriter, r *http.Request) {
	from, to, err := timeRange(r, time.Hour)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	filters, err := textQueries(r, "queue", "namespace", "task")
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	qs, err := a.queuesWhere(r, "queue", "namespace", "task")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	win := db.Window{From: from, To: to, Width: bucketWidth(to.Sub(from)), AcrossQueues: true}
	if slices.ContainsFunc(filters, func(f *string) bool { return f != nil }) {
		win.Queues = []string{} // none matches: no counts
		for _, q := range qs {
			win.Queues = append(win.Queues, q.Name)
		}
	}
	ctx, t, now := r.Context(), tenant(r), time.Now()
	var (
		o             db.Overview
		l             db.LeaseFigures
		rows          []db.QueueMinutes
		life          db.QueueMinutes
		samples, live []db.ReplicaSample
	)
	err = inTurn(
		func() (err error) { o, err = a.store.Overview(ctx, t); return },
		func() (err error) { l, err = a.store.LeaseFigures(ctx, t); return },
		func() (err error) { rows, err = a.store.QueueMinutes(ctx, t, win); return },
		func() (err error) { life, err = a.lifetime(r); return },
		func() (err error) { samples, err = a.store.ReplicaSamples(ctx, win); return },
		func() (err error) {
			live, err = a.store.ReplicaSamples(ctx, db.Window{From: now.Add(-liveFor), To: now})
			return
		},
	)
	if err != nil {
		a.fail(w, r, err)
		return
	}

	queues := []map[string]any{}
	for _, q := range qs {
		if q.Counts.Total == 0 {
			continue
		}
		queues = append(queues, map[string]any{"id": q.ID, "name": q.Name, "namespace": q.Namespace, "task": q.Task,
			"partitions": q.Partitions, "totalConsumed": q.Consumed,
			// The CLI's columns (§4).
			"pending": q.Counts.Pending})
	}
	messages := lifetimeMessages(o, life)
	messages["processing"] = 0 // §4: Queen's shape
	n := &life.N
	messages["requests"] = map[string]int64{"push": n[counters.PushRequests], "pop": n[counters.PopRequests],
		"ack": n[counters.AckRequests]}
	messages["batchEfficiency"] = map[string]float64{"push": perRequest(n[counters.PushMessages], n[counters.PushRequests]),
		"pop": perRequest(n[counters.PopMessages], n[counters.PopRequests]),
		"ack": perRequest(n[counters.AckSuccess]+n[counters.AckFailed], n[counters.AckRequests])}
	throughput := statusSeries(win, rows, samples)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"timeRange":     map[string]any{"from": instant(&from), "to": instant(&to)},
		"bucketMinutes": bucketMinutes(win), "pointCount": len(throughput), "throughput": throughput,
		"queues":   queues,
		"messages": messages,
		"leases": map[string]any{"active": l.Active, "partitionsWithLeases": l.Partitions,
			"totalBatchSize": l.BatchSize, "totalAcked": l.Acked},
		"deadLetterQueue": map[string]any{"totalMessages": l.DeadLetters, "affectedPartitions": l.DeadPartitions,
			"topErrors": l.TopErrors},
		"errors":   map[string]any{"dbErrors": 0, "ackFailed": n[counters.AckFailed], "dlqMessages": l.DeadLetters},
		"statsAge": 0,
		"workers":  a.workers(live),
	})
}

// inTurn runs the reads one after the other, up to the first that fails.
func inTurn(reads ...func() error) error {
	for _, read := range reads {
		if err := read(); err != nil {
			return err
		}
	}
	return nil
}

// perRequest is messages per request, to 2 decimals (batchEfficiency).
func perRequest(messages, requests int64) float64 {
	if requests == 0 {
		return 0
	}
	return round2(float64(messages) / float64(requests))
}

// statusRow is one bucket of the status series. Regent has no event loop:
// those fields are null, as are the health fields of a bucket without a
// sample (the dashboard draws gaps).
type statusRow struct {
	Timestamp          string   `json:"timestamp"`
	Ingested           int64    `json:"ingested"`
	Processed          int64    `json:"processed"`
	PopMessages        int64    `json:"popMessages"`
	IngestedPerSecond  float64  `json:"ingestedPerSecond"`
	ProcessedPerSecond float64  `json:"processedPerSecond"`
	PopPerSecond       float64  `json:"popPerSecond"`
	AvgLagMs           int64    `json:"avgLagMs"`
	MaxLagMs           int64    `json:"maxLagMs"`
	DBErrors           int64    `json:"dbErrors"` // Regent does not count them
	AckFailed          int64    `json:"ackFailed"`
	DLQCount           int64    `json:"dlqCount"`
	AvgEventLoopLagMs  *float64 `json:"avgEventLoopLagMs"`
	MaxEventLoopLagMs  *float64 `json:"maxEventLoopLagMs"`
	MinFreeSlots       *float64 `json:"minFreeSlots"`
	CPUUserPct         *float64 `json:"queenCpuUserPct"`
	CPUSysPct          *float64 `json:"queenCpuSysPct"`
	RSSMb              *float64 `json:"queenRssMb"`
	DBPoolActive       *float64 `json:"dbPoolActive"`
	DBPoolIdle         *float64 `json:"dbPoolIdle"`
	DBPoolSize         *float64 `json:"dbPoolSize"`
}

// statusSeries lays out one row per bucket of the window, newest first,
// with the counts summed over queues and the health averaged over the
// bucket's samples of every replica (minFreeSlots: the fewest idle
// connections of any).
func statusSeries(win db.Window, rows []db.QueueMinutes, samples []db.ReplicaSample) []statusRow {
	counts := map[int64]*db.QueueMinutes{}
	for i := range rows {
		counts[rows[i].Bucket.Unix()] = &rows[i]
	}
	type health struct{ user, sys, rss, active, idle, size leaf }
	healths := map[int64]*health{}
	for _, s := range samples {
		b := s.Minute.Truncate(win.Width).Unix()
		h := healths[b]
		if h == nil {
			h = &health{}
			healths[b] = h
		}
		h.user.add(s.CPUUser)
		h.sys.add(s.CPUSys)
		h.rss.add(float64(s.RSS) / (1 << 20))
		h.active.add(float64(s.PoolActive))
		h.idle.add(float64(s.PoolIdle))
		h.size.add(float64(s.PoolSize))
	}
	avg := func(l *leaf) *float64 { return ptr(round2(l.sum / float64(l.n))) }
	out := []statusRow{}
	for t := win.To.Truncate(win.Width); !t.Before(win.From.Truncate(win.Width)) && len(out) < maxBuckets; t = t.Add(-win.Width) {
		row := statusRow{Timestamp: bucketKey(t)}
		if m := counts[t.Unix()]; m != nil {
			n := &m.N
			row.Ingested, row.Processed, row.PopMessages = n[counters.PushMessages], n[counters.AckSuccess]+n[counters.AckFailed], n[counters.PopMessages]
			row.IngestedPerSecond, row.ProcessedPerSecond = perSecond(row.Ingested, win), perSecond(row.Processed, win)
			row.PopPerSecond = perSecond(row.PopMessages, win)
			row.AvgLagMs, row.MaxLagMs = ratio(n[counters.LagSum], n[counters.LagCount]), m.LagMax
			row.AckFailed, row.DLQCount = n[counters.AckFailed], n[counters.DeadLettered]
		}
		if h := healths[t.Unix()]; h != nil {
			row.CPUUserPct, row.CPUSysPct, row.RSSMb = avg(&h.user), avg(&h.sys), avg(&h.rss)
			row.DBPoolActive, row.DBPoolIdle, row.DBPoolSize = avg(&h.active), avg(&h.idle), avg(&h.size)
			row.MinFreeSlots = ptr(h.idle.min)
		}
		out = append(out, row)
	}
	return out
}

// workers are the replicas sampled in the last 2 minutes (§4), and this
// one with its live pool figures while it has no sample yet.
func (a *API) workers(live []db.ReplicaSample) []map[string]any {
	out := workers(live, nil)
	if !slices.ContainsFunc(live, func(s db.ReplicaSample) bool { return s.Replica == a.replica }) {
		out = append(out, a.worker())
	}
	return out
}

// worker describes this replica, unsampled, as §4's workers element.
func (a *API) worker() map[string]any {
	pool := a.store.PoolStats()
	return map[string]any{"hostname": a.replica, "workerId": 0, "avgEventLoopLagMs": 0, "maxEventLoopLagMs": 0,
		"freeSlots": pool.IdleConns, "dbConnections": pool.TotalConns, "jobQueueSize": 0, "messagesProcessed": 0}
}

// handleStatusQueues is GET /api/v1/status/queues: newest first, paged;
// pending includes processing.
func (a *API) handleStatusQueues(w http.ResponseWriter, r *http.Request) {
	limit, offset := intQuery(r, "limit", 100), intQuery(r, "offset", 0)
	qs, err := a.queuesWhere(r, "namespace", "task")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := []map[string]any{}
	for _, q := range qs[min(offset, len(qs)):min(offset+limit, len(qs))] {
		m := queueHead(&q)
		m["partitions"] = q.Partitions
		m["messages"] = map[string]int64{"total": q.Counts.Total, "pending": q.Counts.Pending,
			"processing": q.Counts.Processing, "completed": q.Counts.Completed()}
		out = append(out, m)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"queues": out, "pagination": map[string]int{"limit": limit, "offset": offset}})
}

// handleStatusQueue is GET /api/v1/status/queues/{queue}.
func (a *API) handleStatusQueue(w http.ResponseWriter, r *http.Request) {
	q, parts, ok := a.queueDetail(w, r)
	if !ok {
		return
	}
	type cursor struct {
		TotalConsumed   int64 `json:"totalConsumed"`
		BatchesConsumed int64 `json:"batchesConsumed"` // Regent counts messages, not batches
	}
	type entry struct {
		partitionEntry
		Messages     sixCounts `json:"messages"`
		Cursor       cursor    `json:"cursor"`
		LastActivity *string   `json:"lastActivity"`
	}
	ps := make([]entry, 0, len(parts))
	for i := range parts {
		p := &parts[i]
		e := entry{partitionEntry: newPartitionEntry(p), Cursor: cursor{TotalConsumed: p.Consumed}, LastActivity: instant(p.LastActivity)}
		e.Messages = e.Stats
		ps = append(ps, e)
	}
	head := queueHead(q)
	head["priority"] = q.Priority
	head["config"] = map[string]any{"leaseTime": q.LeaseTime, "retryLimit": q.RetryLimit, "retryDelay": q.RetryDelay,
		"ttl": q.TTL, "maxQueueSize": q.MaxSize, "deadLetterQueue": q.DeadLetterQueue}
	totals := struct {
		sixCounts
		Messages sixCounts `json:"messages"`
	}{six(q.Counts), six(q.Counts)}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"queue": head, "partitions": ps, "totals": totals})
}

// handleBuffers is GET /api/v1/status/buffers: this replica's push spool and
// whether the database answers.
func (a *API) handleBuffers(w http.ResponseWriter, r *http.Request) {
	healthy := a.store.Ping(r.Context()) == nil
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"pending": a.spool.Pending(tenant(r)), "failed": 0, "dbHealthy": healthy, "worker": 0})
}
