package admin

import (
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/admin/store"
	"github.com/regent-mq/regent/broker/httpx"
)

// The status routes (queue-admin-api.md §4, but /status/analytics) count
// as the resources routes do. The time series of GET /api/v1/status needs
// per-minute counters of pushes, pops, acks and pop lag, which Regent does
// not keep yet: its buckets are laid out as §5 says, with those counts 0
// and the process-health fields null.

// maxBuckets bounds the series of one request: a range of years in 6-hour
// buckets is still a few thousand.
const maxBuckets = 10000

// handleStatus is GET /api/v1/status.
func (a *API) handleStatus(w http.ResponseWriter, r *http.Request) {
	from, to, err := timeRange(r, time.Hour)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	if to.Before(from) {
		httpx.Fail(w, httpx.BadRequest("from must not be after to"))
		return
	}
	all, err := a.store.Queues(r.Context(), tenant(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// The message counters cover every queue; the filters, the queue list.
	var given int64
	var c store.Counts
	for _, q := range all {
		given += q.Given
		c.Add(q.Counts)
	}
	qs, err := filterQueues(r, slices.Clone(all), "queue", "namespace", "task")
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	l, err := a.store.Leases(r.Context(), tenant(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}

	width := int(bucketWidth(to.Sub(from)) / time.Minute)
	step := time.Duration(width) * time.Minute
	throughput := []map[string]any{}
	for t := to.Truncate(step); !t.Before(from.Truncate(step)) && len(throughput) < maxBuckets; t = t.Add(-step) {
		throughput = append(throughput, map[string]any{
			"timestamp": bucketKey(t), "ingested": 0, "processed": 0, "popMessages": 0,
			"ingestedPerSecond": 0, "processedPerSecond": 0, "popPerSecond": 0, "avgLagMs": 0, "maxLagMs": 0,
			"dbErrors": 0, "ackFailed": 0, "dlqCount": 0,
			"avgEventLoopLagMs": nil, "maxEventLoopLagMs": nil, "minFreeSlots": nil, "queenCpuUserPct": nil,
			"queenCpuSysPct": nil, "queenRssMb": nil, "dbPoolActive": nil, "dbPoolIdle": nil, "dbPoolSize": nil,
		})
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
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"timeRange":     map[string]any{"from": instant(&from), "to": instant(&to)},
		"bucketMinutes": width, "pointCount": len(throughput), "throughput": throughput,
		"queues": queues,
		"messages": map[string]any{"total": given, "pending": c.Waiting, "processing": 0,
			"completed": max(given-c.Pending-c.DeadLetter, 0), "failed": 0, "deadLetter": c.DeadLetter,
			"requests":        map[string]int{"push": 0, "pop": 0, "ack": 0},
			"batchEfficiency": map[string]float64{"push": 0, "pop": 0, "ack": 0}},
		"leases": map[string]any{"active": l.Active, "partitionsWithLeases": l.Partitions,
			"totalBatchSize": l.BatchSize, "totalAcked": l.Acked},
		"deadLetterQueue": map[string]any{"totalMessages": l.DeadLetters, "affectedPartitions": l.DeadPartitions,
			"topErrors": l.TopErrors},
		"errors":   map[string]any{"dbErrors": 0, "ackFailed": 0, "dlqMessages": l.DeadLetters},
		"statsAge": 0,
		"workers":  []map[string]any{a.worker()},
	})
}

// worker describes this replica as §4's workers element. Regent keeps no
// registry of live replicas, so the list is the replica that answers.
func (a *API) worker() map[string]any {
	host, _ := os.Hostname()
	m := map[string]any{"hostname": host, "workerId": 0, "avgEventLoopLagMs": 0, "maxEventLoopLagMs": 0,
		"freeSlots": nil, "dbConnections": nil, "jobQueueSize": 0, "messagesProcessed": 0}
	if p, ok := a.db.(interface{ Stat() *pgxpool.Stat }); ok {
		s := p.Stat()
		m["dbConnections"], m["freeSlots"] = s.TotalConns(), s.MaxConns()-s.AcquiredConns()
	}
	return m
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
	var one int
	healthy := a.db.QueryRow(r.Context(), `SELECT 1`).Scan(&one) == nil
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"pending": a.spool.Pending(tenant(r)), "failed": 0, "dbHealthy": healthy, "worker": 0})
}
