package admin

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/admin/store"
	"github.com/regent-mq/regent/broker/httpx"
)

// The resources routes (queue-admin-api.md §3) count from partition ends
// and cursors, live, on every call (store.partitionCounts): statsAge is 0.
// Regent keeps no per-minute throughput or pop-lag counters of its own yet,
// so the overview's throughput and lag.time are 0.

// handleOverview is GET /api/v1/resources/overview.
func (a *API) handleOverview(w http.ResponseWriter, r *http.Request) {
	o, err := a.store.Overview(r.Context(), tenant(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c := o.Counts
	completed := max(o.Given-c.Pending-c.DeadLetter, 0)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"queues": o.Queues, "partitions": o.Partitions, "namespaces": o.Namespaces, "tasks": o.Tasks,
		"messages": map[string]int64{"total": o.Given, "pending": c.Waiting, "processing": c.Processing,
			"completed": completed, "failed": 0, "deadLetter": c.DeadLetter},
		"lag": map[string]any{
			"time":   map[string]float64{"avg": 0, "median": 0, "min": 0, "max": 0},
			"offset": map[string]float64{"avg": round2(o.PendingAvg), "median": o.PendingMedian, "min": float64(o.PendingMin), "max": float64(o.PendingMax)},
		},
		"throughput": map[string]float64{"ingestedPerSecond": 0, "processedPerSecond": 0},
		"timestamp":  instant(ptr(time.Now())), "statsAge": 0,
	})
}

func ptr[T any](v T) *T { return &v }

// queuesWhere lists the tenant's queues, filtered by the named query
// parameters (filterQueues).
func (a *API) queuesWhere(r *http.Request, names ...string) ([]store.Queue, error) {
	qs, err := a.store.Queues(r.Context(), tenant(r))
	if err != nil {
		return nil, err
	}
	return filterQueues(r, qs, names...)
}

// filterQueues keeps the queues whose queue name, namespace or task is what
// the query parameter of that name says, when it says something.
func filterQueues(r *http.Request, qs []store.Queue, names ...string) ([]store.Queue, error) {
	f, err := textQueries(r, names...)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(qs, func(q store.Queue) bool {
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

func queueHead(q *store.Queue) map[string]any {
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

func six(c store.Counts) sixCounts {
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

func newPartitionEntry(p *store.Partition) partitionEntry {
	return partitionEntry{ID: p.ID, Name: p.Name, CreatedAt: instant(&p.CreatedAt), Stats: six(p.Counts),
		OldestMessage: instant(p.OldestPending), NewestMessage: instant(p.Newest)}
}

// queueDetail reads the queue the path names; nil, after writing the 404,
// when the tenant has none.
func (a *API) queueDetail(w http.ResponseWriter, r *http.Request) (*store.Queue, []store.Partition, bool) {
	name := r.PathValue("queue")
	var q *store.Queue
	var parts []store.Partition
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
	a.groupQueues(w, r, "namespace", func(q *store.Queue) string { return q.Namespace })
}

// handleTasks is GET /api/v1/resources/tasks.
func (a *API) handleTasks(w http.ResponseWriter, r *http.Request) {
	a.groupQueues(w, r, "task", func(q *store.Queue) string { return q.Task })
}

// groupQueues answers {"<key>s": [...]}: the non-empty values of key, sorted,
// with their queues, partitions and counts (pending without processing).
func (a *API) groupQueues(w http.ResponseWriter, r *http.Request, key string, of func(*store.Queue) string) {
	qs, err := a.store.Queues(r.Context(), tenant(r))
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
