package admin

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/pg/db"
)

// The resources routes (queue-admin-api.md §3) count from partition ends
// and cursors, live, on every call (db.partitionCounts): statsAge is 0.
// Throughput, pop lag and the lifetime ack and dead-letter counts come from
// the per-minute counters (queen.queue_minutes).

// recent is the overview's throughput and lag window: the last five minutes
// of counters, the current one included.
const recent = 5 * time.Minute

// handleOverview is GET /api/v1/resources/overview. Cost: three statements.
// The overview (a scan of the tenant's partitions with their cursors and
// dead letters, as the other resources routes), and two range scans of
// queue_minutes' primary key (tenant, minute): the last five minutes, and
// the last 15 of the lifetime totals (lifetimes.get).
func (a *API) handleOverview(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	var o db.Overview
	var last, life db.QueueMinutes
	err := inTurn(
		func() (err error) { o, err = a.store.Overview(r.Context(), tenant(r)); return },
		func() (err error) {
			last, err = sumMinutes(r.Context(), a.store, tenant(r), now.Add(time.Minute-recent), now)
			return
		},
		func() (err error) { life, err = a.lifetime(r); return },
	)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	n := &last.N
	// Pop lag in seconds, from ms.
	lagAvg, lagMax := float64(ratio(n[counters.LagSum], n[counters.LagCount]))/1000, float64(last.LagMax)/1000
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"queues": o.Queues, "partitions": o.Partitions, "namespaces": o.Namespaces, "tasks": o.Tasks,
		"messages": lifetimeMessages(o, life),
		"lag": map[string]any{
			"time":   map[string]float64{"avg": round2(lagAvg), "median": 0, "min": 0, "max": round2(lagMax)},
			"offset": map[string]float64{"avg": round2(o.PendingAvg), "median": o.PendingMedian, "min": float64(o.PendingMin), "max": float64(o.PendingMax)},
		},
		"throughput": map[string]float64{
			"ingestedPerSecond":  round2(float64(n[counters.PushMessages]) / recent.Seconds()),
			"processedPerSecond": round2(float64(n[counters.AckSuccess]+n[counters.AckFailed]) / recent.Seconds()),
		},
		"timestamp": instant(ptr(now)), "statsAge": 0,
	})
}

// lifetimeMessages are the overview's and status's messages: total is every
// message pushed (the partitions' ends, exact for all time), completed,
// failed and deadLetter the lifetime counters, that is everything
// queue_minutes keeps (90 days by default); pending and processing are now.
func lifetimeMessages(o db.Overview, life db.QueueMinutes) map[string]any {
	n := &life.N
	return map[string]any{"total": o.Given, "pending": o.Counts.Waiting, "processing": o.Counts.Processing,
		"completed": n[counters.AckSuccess], "failed": n[counters.AckFailed], "deadLetter": n[counters.DeadLettered]}
}

// lifetime is the tenant's counters over every minute kept.
func (a *API) lifetime(r *http.Request) (db.QueueMinutes, error) {
	return a.lifetimes.get(r.Context(), a.store, tenant(r), time.Now())
}

func ptr[T any](v T) *T { return &v }

// queuesWhere lists the tenant's queues, filtered by the named query
// parameters (filterQueues).
func (a *API) queuesWhere(r *http.Request, names ...string) ([]db.QueueSummary, error) {
	qs, err := a.store.QueueSummaries(r.Context(), tenant(r))
	if err != nil {
		return nil, err
	}
	return filterQueues(r, qs, names...)
}

// filterQueues keeps the queues whose queue name, namespace or task is what
// the query parameter of that name says, when it says something.
func filterQueues(r *http.Request, qs []db.QueueSummary, names ...string) ([]db.QueueSummary, error) {
	f, err := textQueries(r, names...)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(qs, func(q db.QueueSummary) bool {
		for i, name := range names {
			if f[i] == nil {
				continue
			}
			v := map[string]string{"queue": q.Name, "namespace": q.Namespace, "task": q.Task}[name]
			if v != *f[i] {
				return true
			}
		}
		return false
	}), nil
}

// handleResourceQueues is GET /api/v1/resources/queues: pending excludes
// processing. The fields after messages are the CLI's (§3).
func (a *API) handleResourceQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := a.queuesWhere(r, "namespace", "task")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(qs))
	for _, q := range qs {
		m := queueHead(&q)
		m["partitions"] = q.Partitions
		m["messages"] = map[string]int64{"total": q.Counts.Total, "pending": q.Counts.Waiting, "processing": q.Counts.Processing}
		m["partitionCount"], m["leaseTime"], m["retryLimit"] = q.Partitions, q.LeaseTime, q.RetryLimit
		m["maxSize"], m["encryptionEnabled"] = q.MaxSize, q.Encrypted
		out = append(out, m)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"queues": out})
}

func queueHead(q *db.QueueSummary) map[string]any {
	return map[string]any{"id": q.ID, "name": q.Name, "namespace": q.Namespace, "task": q.Task, "createdAt": instant(&q.CreatedAt)}
}

// sixCounts are the six counters of §3; pending includes processing.
type sixCounts struct {
	Total      int64 `json:"total"`
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
	DeadLetter int64 `json:"deadLetter"`
}

func six(c db.MessageCounts) sixCounts {
	return sixCounts{Total: c.Total, Pending: c.Pending, Processing: c.Processing, Completed: c.Completed(), DeadLetter: c.DeadLetter}
}

// partitionEntry is a partition of the queue detail routes. Their queues
// may have 10,000 partitions: structs, not maps, keep the answer cheap.
type partitionEntry struct {
	ID            uuid.UUID `json:"id"`
	Name          string    `json:"name"`
	CreatedAt     *string   `json:"createdAt"`
	Stats         sixCounts `json:"stats"`
	OldestMessage *string   `json:"oldestMessage"`
	NewestMessage *string   `json:"newestMessage"`
}

func newPartitionEntry(p *db.PartitionSummary) partitionEntry {
	return partitionEntry{ID: p.ID, Name: p.Name, CreatedAt: instant(&p.CreatedAt), Stats: six(p.Counts),
		OldestMessage: instant(p.OldestPending), NewestMessage: instant(p.Newest)}
}

// queueDetail reads the queue the path names; nil, after writing the 404,
// when the tenant has none.
func (a *API) queueDetail(w http.ResponseWriter, r *http.Request) (*db.QueueSummary, []db.PartitionSummary, bool) {
	name := r.PathValue("queue")
	var q *db.QueueSummary
	var parts []db.PartitionSummary
	var err error
	if isText(name) {
		q, parts, err = a.store.QueueDetail(r.Context(), tenant(r), name)
	}
	if err != nil {
		a.fail(w, r, err)
		return nil, nil, false
	}
	if q == nil {
		httpx.WriteError(w, http.StatusNotFound, "Queue not found")
		return nil, nil, false
	}
	return q, parts, true
}

// handleResourceQueue is GET /api/v1/resources/queues/{queue}: partitions by
// name; pending includes processing; oldestMessage is the oldest pending
// message's createdAt (segment granularity).
func (a *API) handleResourceQueue(w http.ResponseWriter, r *http.Request) {
	q, parts, ok := a.queueDetail(w, r)
	if !ok {
		return
	}
	ps := make([]partitionEntry, 0, len(parts))
	for i := range parts {
		ps = append(ps, newPartitionEntry(&parts[i]))
	}
	m := queueHead(q)
	m["partitions"], m["totals"] = ps, six(q.Counts)
	httpx.WriteJSON(w, http.StatusOK, m)
}

// handleNamespaces is GET /api/v1/resources/namespaces.
func (a *API) handleNamespaces(w http.ResponseWriter, r *http.Request) {
	a.groupQueues(w, r, "namespace", func(q *db.QueueSummary) string { return q.Namespace })
}

// handleTasks is GET /api/v1/resources/tasks.
func (a *API) handleTasks(w http.ResponseWriter, r *http.Request) {
	a.groupQueues(w, r, "task", func(q *db.QueueSummary) string { return q.Task })
}

// groupQueues answers {"<key>s": [...]}: the non-empty values of key, sorted,
// with their queues, partitions and counts (pending without processing).
func (a *API) groupQueues(w http.ResponseWriter, r *http.Request, key string, of func(*db.QueueSummary) string) {
	qs, err := a.store.QueueSummaries(r.Context(), tenant(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	type group struct {
		queues, partitions int
		total, pending     int64
	}
	groups := map[string]*group{}
	for i := range qs {
		v := of(&qs[i])
		if v == "" {
			continue
		}
		g := groups[v]
		if g == nil {
			g = &group{}
			groups[v] = g
		}
		g.queues++
		g.partitions += qs[i].Partitions
		g.total += qs[i].Counts.Total
		g.pending += qs[i].Counts.Waiting
	}
	out := make([]map[string]any, 0, len(groups))
	for _, v := range slices.Sorted(maps.Keys(groups)) {
		g := groups[v]
		out = append(out, map[string]any{key: v, "queues": g.queues, "partitions": g.partitions,
			"messages": map[string]int64{"total": g.total, "pending": g.pending},
			// The CLI's names (§3).
			"name": v, "queueCount": g.queues})
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{key + "s": out})
}
