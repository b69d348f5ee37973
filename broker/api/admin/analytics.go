package admin

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/api/server"
	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/domain/seal"
	"github.com/regent-mq/regent/broker/pg/db"

	"log/slog"
)

// Analytics serves GET /api/v1/status/analytics, /api/v1/analytics/* and
// the traces (queue-admin-api.md §4, §5, §6). Throughput comes from the
// per-minute counters of broker/domain/counters, never from the log, so a
// dashboard polling every few seconds reads a few hundred rows of
// queue_minutes per call. Every read covers the caller's tenant only,
// except the process samples and PostgreSQL's statistics, which are the
// cluster's.
type Analytics struct {
	store   *db.DB
	replica string
	sealer  *seal.Sealer
	log     *slog.Logger
}

// NewAnalytics returns the analytics and traces routes' handlers. replica
// is stamped on the traces this replica records; sealer opens the payloads
// the traces read returns.
func NewAnalytics(store *db.DB, replica string, sealer *seal.Sealer, log *slog.Logger) *Analytics {
	return &Analytics{store: store, replica: replica, sealer: sealer, log: log}
}

// Routes are the analytics and traces routes, all read-only but the trace
// write (§10).
func (a *Analytics) Routes() []server.Route {
	const an = "/api/v1/analytics"
	return []server.Route{
		{Method: "GET", Path: "/api/v1/status/analytics", Level: auth.ReadOnly, Handler: a.handleStatusAnalytics},
		{Method: "GET", Path: an + "/queue-lag", Level: auth.ReadOnly, Handler: a.handleQueueLag},
		{Method: "GET", Path: an + "/queue-ops", Level: auth.ReadOnly, Handler: a.handleQueueOps},
		{Method: "GET", Path: an + "/queue-parked-replicas", Level: auth.ReadOnly, Handler: a.handleParkedReplicas},
		{Method: "GET", Path: an + "/retention", Level: auth.ReadOnly, Handler: a.handleRetention},
		{Method: "GET", Path: an + "/system-metrics", Level: auth.ReadOnly, Handler: a.handleSystemMetrics},
		{Method: "GET", Path: an + "/worker-metrics", Level: auth.ReadOnly, Handler: a.handleWorkerMetrics},
		{Method: "GET", Path: an + "/postgres-stats", Level: auth.ReadOnly, Handler: a.handlePostgresStats},
		{Method: "POST", Path: "/api/v1/traces", Level: auth.ReadWrite, Handler: a.handleAddTrace},
		{Method: "GET", Path: "/api/v1/traces/names", Level: auth.ReadOnly, Handler: a.handleTraceNames},
		{Method: "GET", Path: "/api/v1/traces/by-name/{traceName}", Level: auth.ReadOnly, Handler: a.handleTracesByName},
		{Method: "GET", Path: "/api/v1/traces/{partitionId}/{transactionId}", Level: auth.ReadOnly, Handler: a.handleMessageTraces},
	}
}

func (a *Analytics) fail(w http.ResponseWriter, r *http.Request, err error) { fail(a.log, w, r, err) }

// opsRow is one element of queue-ops' series: a struct, since a busy
// dashboard reads a thousand of them every few seconds.
type opsRow struct {
	Bucket            string  `json:"bucket"`
	QueueName         string  `json:"queueName"`
	PushRequests      int64   `json:"pushRequests"`
	PushMessages      int64   `json:"pushMessages"`
	PopMessages       int64   `json:"popMessages"`
	PopEmpty          int64   `json:"popEmpty"`
	AckRequests       int64   `json:"ackRequests"`
	AckSuccess        int64   `json:"ackSuccess"`
	AckFailed         int64   `json:"ackFailed"`
	Transactions      int64   `json:"transactions"`
	PartitionsCreated int64   `json:"partitionsCreated"`
	PartitionsDeleted int64   `json:"partitionsDeleted"` // Regent deletes partitions only with their queue
	PartitionCount    int64   `json:"partitionCount"`
	AvgLagMs          int64   `json:"avgLagMs"`
	MaxLagMs          int64   `json:"maxLagMs"`
	PushPerSecond     float64 `json:"pushPerSecond"`
	PopPerSecond      float64 `json:"popPerSecond"`
	AckPerSecond      float64 `json:"ackPerSecond"`
	EmptyPerSecond    float64 `json:"emptyPerSecond"`
	ParkedCount       float64 `json:"parkedCount"`
}

type bucketQueue struct {
	bucket time.Time
	queue  string
}

// handleQueueOps is GET /api/v1/analytics/queue-ops: the tenant's queues'
// counts by bucket and queue. Cost: two statements, a range scan of
// queue_minutes (tenant, minute) and the partitions of the queues seen,
// counted by creation bucket through partitions (queue_id, name).
func (a *Analytics) handleQueueOps(w http.ResponseWriter, r *http.Request) {
	win, rows, ok := windowed(a, w, r, a.store.QueueMinutes)
	if !ok {
		return
	}
	keys, sums := rollup(rows, func(m db.QueueMinutes) bucketQueue { return bucketQueue{m.Bucket, m.Queue} })
	var queues []string
	for _, k := range keys {
		queues = append(queues, k.queue)
	}
	slices.Sort(queues)
	queues = slices.Compact(queues)
	created, err := a.store.PartitionsCreated(r.Context(), tenant(r), win, queues)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	series := make([]opsRow, 0, len(keys))
	for _, k := range keys { // already by bucket, then queue
		m := sums[k]
		n := &m.N
		var made, count int64
		for b, c := range created[k.queue] {
			if b == k.bucket.Unix() {
				made = c
			}
			if b <= k.bucket.Unix() {
				count += c
			}
		}
		series = append(series, opsRow{
			Bucket: bucketKey(k.bucket), QueueName: k.queue,
			PushRequests: n[counters.PushRequests], PushMessages: n[counters.PushMessages],
			PopMessages: n[counters.PopMessages], PopEmpty: n[counters.PopEmpty],
			AckRequests: n[counters.AckRequests], AckSuccess: n[counters.AckSuccess], AckFailed: n[counters.AckFailed],
			Transactions: n[counters.Transactions], PartitionsCreated: made, PartitionCount: count,
			AvgLagMs: ratio(n[counters.LagSum], n[counters.LagCount]), MaxLagMs: m.LagMax,
			PushPerSecond: perSecond(n[counters.PushMessages], win), PopPerSecond: perSecond(n[counters.PopMessages], win),
			AckPerSecond:   perSecond(n[counters.AckSuccess]+n[counters.AckFailed], win),
			EmptyPerSecond: perSecond(n[counters.PopEmpty], win), ParkedCount: parked(n[counters.ParkedSum], win),
		})
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"timeRange": timeRangeJSON(win), "bucketMinutes": bucketMinutes(win), "queues": nonNil(queues), "series": series,
	})
}

// parked is the average number of long-polls parked over a bucket, from
// the once-a-second samples summed over it.
func parked(sum int64, w db.Window) float64 { return round2(float64(sum) / w.Width.Seconds()) }

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// handleQueueLag is GET /api/v1/analytics/queue-lag: a bare array of the
// raw per-minute pop lag, newest first. Cost: one range scan of
// queue_minutes (tenant, minute), at most 10,000 rows.
func (a *Analytics) handleQueueLag(w http.ResponseWriter, r *http.Request) {
	_, rows, ok := windowed(a, w, r, a.store.LagMinutes)
	if !ok {
		return
	}
	out := make([]map[string]any, 0, len(rows))
	for _, m := range rows {
		out = append(out, map[string]any{"queueName": m.Queue, "popCount": m.Pops,
			"avgLagMs": ratio(m.LagSum, m.Pops), "maxLagMs": m.LagMax, "bucketTime": bucketKey(m.Minute)})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// minutesPerReplica reads the counters with each replica's kept apart.
func (a *Analytics) minutesPerReplica(ctx context.Context, tenant string, win db.Window) ([]db.QueueMinutes, error) {
	win.PerReplica = true
	return a.store.QueueMinutes(ctx, tenant, win)
}

// handleParkedReplicas is GET /api/v1/analytics/queue-parked-replicas: the
// long-polls parked on the tenant's queues by bucket, queue and replica.
// Cost: one range scan of queue_minutes (tenant, minute).
func (a *Analytics) handleParkedReplicas(w http.ResponseWriter, r *http.Request) {
	win, rows, ok := windowed(a, w, r, func(ctx context.Context, tenant string, win db.Window) ([]db.QueueMinutes, error) {
		win.Parked = true
		return a.minutesPerReplica(ctx, tenant, win)
	})
	if !ok {
		return
	}
	series := []map[string]any{}
	replicas := []map[string]any{}
	seen := map[string]bool{}
	for _, m := range rows {
		if m.N[counters.ParkedSum] == 0 {
			continue
		}
		series = append(series, map[string]any{"bucket": bucketKey(m.Bucket), "queueName": m.Queue,
			"hostname": m.Replica, "workerId": 0, "parkedCount": parked(m.N[counters.ParkedSum], win)})
		if !seen[m.Replica] {
			seen[m.Replica] = true
			replicas = append(replicas, map[string]any{"hostname": m.Replica, "workerId": 0})
		}
	}
	slices.SortFunc(replicas, func(x, y map[string]any) int { return cmp.Compare(x["hostname"].(string), y["hostname"].(string)) })
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"timeRange": timeRangeJSON(win), "bucketMinutes": bucketMinutes(win), "series": series, "replicas": replicas,
	})
}

// handleRetention is GET /api/v1/analytics/retention: what the retention
// sweeps removed from the tenant's queues, by bucket. Cost: one range scan
// of retention_events (tenant, at).
func (a *Analytics) handleRetention(w http.ResponseWriter, r *http.Request) {
	win, buckets, ok := windowed(a, w, r, a.store.RetentionBuckets)
	if !ok {
		return
	}
	var total db.RetentionBucket
	series := make([]map[string]any, 0, len(buckets))
	five := func(b db.RetentionBucket) map[string]any {
		return map[string]any{"retentionMsgs": b.Retention, "completedRetentionMsgs": b.Completed, "evictionMsgs": b.Evicted,
			"totalMsgs": b.Retention + b.Completed + b.Evicted, "eventCount": b.Events}
	}
	for _, b := range buckets {
		row := five(b)
		row["bucket"] = bucketKey(b.Bucket)
		series = append(series, row)
		total.Retention, total.Completed, total.Evicted = total.Retention+b.Retention, total.Completed+b.Completed, total.Evicted+b.Evicted
		total.Events += b.Events
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"timeRange": timeRangeJSON(win), "bucketMinutes": bucketMinutes(win), "series": series, "totals": five(total),
	})
}

// handleWorkerMetrics is GET /api/v1/analytics/worker-metrics: the tenant's
// counts by bucket, of one replica when hostname is given. Cost: two
// statements, a range scan of queue_minutes (tenant, minute) and one of
// replica_samples (minute) over the last 5 minutes.
func (a *Analytics) handleWorkerMetrics(w http.ResponseWriter, r *http.Request) {
	win, rows, ok := windowed(a, w, r, a.minutesPerReplica)
	if !ok {
		return
	}
	now := time.Now()
	samples, err := a.store.ReplicaSamples(r.Context(), db.Window{From: now.Add(-5 * time.Minute), To: now, Replica: win.Replica})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	buckets, byBucket := rollup(rows, func(m db.QueueMinutes) time.Time { return m.Bucket })
	series := make([]map[string]any, 0, len(buckets))
	var total db.QueueMinutes
	for i := len(buckets) - 1; i >= 0; i-- { // newest first
		m := byBucket[buckets[i]]
		n := &m.N
		for f := range total.N {
			total.N[f] += n[f]
		}
		acks := n[counters.AckSuccess] + n[counters.AckFailed]
		series = append(series, map[string]any{
			"timestamp": bucketKey(m.Bucket), "pushMessages": n[counters.PushMessages], "popMessages": n[counters.PopMessages],
			"ackMessages": acks, "pushRequests": n[counters.PushRequests],
			"popRequests": n[counters.PopRequests] + n[counters.PopEmpty], "ackRequests": n[counters.AckRequests], "jobsDone": 0,
			"pushPerSecond": perSecond(n[counters.PushMessages], win), "popPerSecond": perSecond(n[counters.PopMessages], win),
			"ackPerSecond": perSecond(acks, win), "avgEventLoopLagMs": 0, "maxEventLoopLagMs": 0, "avgFreeSlots": 0,
			"minFreeSlots": 0, "dbConnections": 0, "avgJobQueueSize": 0, "maxJobQueueSize": 0, "backoffSize": 0,
			"avgLagMs": ratio(n[counters.LagSum], n[counters.LagCount]), "maxLagMs": m.LagMax, "lagCount": n[counters.LagCount],
			"dbErrors": 0, "ackSuccess": n[counters.AckSuccess], "ackFailed": n[counters.AckFailed], "dlqCount": n[counters.DeadLettered],
		})
	}
	queueNames, byQueue := rollup(rows, func(m db.QueueMinutes) string { return m.Queue })
	slices.Sort(queueNames)
	queues := make([]map[string]any, 0, len(queueNames))
	for _, q := range queueNames {
		m := byQueue[q]
		queues = append(queues, map[string]any{"queueName": q, "popCount": m.N[counters.PopMessages],
			"avgLagMs": ratio(m.N[counters.LagSum], m.N[counters.LagCount]), "maxLagMs": m.LagMax})
	}
	t := &total.N
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"timeRange": timeRangeJSON(win), "bucketMinutes": bucketMinutes(win), "pointCount": len(series),
		"timeSeries": series, "workers": workers(samples, rows), "queues": queues,
		"summary": map[string]any{
			"totalPushMessages": t[counters.PushMessages], "totalPopMessages": t[counters.PopMessages],
			"totalAckMessages": t[counters.AckSuccess] + t[counters.AckFailed], "totalPushRequests": t[counters.PushRequests],
			"totalPopRequests": t[counters.PopRequests] + t[counters.PopEmpty], "totalAckRequests": t[counters.AckRequests],
			"totalDbErrors": 0, "totalAckFailed": t[counters.AckFailed], "totalDlq": t[counters.DeadLettered],
			// Regent: what was pushed in the window and not popped in it.
			"pendingMessages": max(t[counters.PushMessages]-t[counters.PopMessages], 0),
		},
	})
}

// workers are the replicas sampled in the last 5 minutes, with the
// messages they acked in the window.
func workers(samples []db.ReplicaSample, rows []db.QueueMinutes) []map[string]any {
	acked := map[string]int64{}
	for _, m := range rows {
		acked[m.Replica] += m.N[counters.AckSuccess]
	}
	out := []map[string]any{}
	for i, s := range samples {
		if i+1 < len(samples) && samples[i+1].Replica == s.Replica {
			continue // samples are by replica, then minute: keep the latest
		}
		out = append(out, map[string]any{"hostname": s.Replica, "workerId": 0, "avgEventLoopLagMs": 0,
			"maxEventLoopLagMs": 0, "freeSlots": s.PoolIdle, "dbConnections": s.PoolSize, "jobQueueSize": 0,
			"backoffSize": 0, "messagesProcessed": acked[s.Replica], "lastSeen": instantOf(s.SampledAt)})
	}
	return out
}

// handleStatusAnalytics is GET /api/v1/status/analytics: the tenant's
// messages still stored, by the bucket they were created in, ascending and
// zero-filled. Cost: one statement over the segments whose time range meets
// the window (the BRIN index on max_created_at), with their partitions and
// queues; a point per segment, not per message.
func (a *Analytics) handleStatusAnalytics(w http.ResponseWriter, r *http.Request) {
	from, to, err := timeRange(r, 24*time.Hour)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	interval, width := "hour", time.Hour
	switch r.URL.Query().Get("interval") {
	case "minute":
		interval, width = "minute", time.Minute
	case "day":
		interval, width = "day", 24*time.Hour
	}
	// Bounded: a point per bucket, and minutes over months are not a chart.
	if to.Sub(from)/width > maxPoints {
		httpx.Fail(w, httpx.BadRequest("from and to span more than %d %ss", maxPoints, interval))
		return
	}
	q := r.URL.Query()
	if err := httpx.CheckTexts("queue", q.Get("queue"), "namespace", q.Get("namespace"), "task", q.Get("task")); err != nil {
		httpx.Fail(w, err)
		return
	}
	win := db.Window{From: from, To: to, Width: width, Queue: q.Get("queue")}
	stored, err := a.store.StoredCounts(r.Context(), tenant(r), win, q.Get("namespace"), q.Get("task"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	points := []map[string]any{}
	for b := from.Truncate(width); !b.After(to); b = b.Add(width) {
		points = append(points, map[string]any{"timestamp": bucketKey(b), "messages": stored[b.Unix()]})
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"dataPoints": points, "interval": interval, "from": instantOf(from), "to": instantOf(to),
	})
}

// maxPoints bounds status/analytics: a little more than a week of minutes.
const maxPoints = 12000
