package queue

import (
	"math"
	"net/http"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/pg/db"
)

// checkOptions refuses values no queue can have. Every integer option is
// stored as a 32-bit integer.
func checkOptions(o *db.QueueOptions) error {
	if o.LeaseTime < 1 || o.LeaseTime > math.MaxInt32 {
		return httpx.BadRequest("options.leaseTime must be from 1 to %d seconds", math.MaxInt32)
	}
	if o.Priority < math.MinInt32 || o.Priority > math.MaxInt32 {
		return httpx.BadRequest("options.priority must be from %d to %d", math.MinInt32, math.MaxInt32)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"retryLimit", o.RetryLimit}, {"retryDelay", o.RetryDelay}, {"maxSize", o.MaxSize},
		{"ttl", o.TTL}, {"delayedProcessing", o.DelayedProcessing}, {"windowBuffer", o.WindowBuffer},
		{"retentionSeconds", o.RetentionSeconds}, {"completedRetentionSeconds", o.CompletedRetentionSeconds},
		{"maxWaitTimeSeconds", o.MaxWaitTimeSeconds},
	} {
		if f.v < 0 || f.v > math.MaxInt32 {
			return httpx.BadRequest("options.%s must be from 0 to %d", f.name, math.MaxInt32)
		}
	}
	if w := o.DedupWindowSeconds; w != nil && (*w < 0 || *w > math.MaxInt32) {
		return httpx.BadRequest("options.dedupWindowSeconds must be from 0 to %d", math.MaxInt32)
	}
	if o.Storage != "rows" && o.Storage != "segments" {
		return httpx.BadRequest("options.storage must be rows or segments, not %q", o.Storage)
	}
	return nil
}

// handleConfigure is POST /api/v1/configure: create or update a queue (the
// options not given take their defaults) and make sure partition Default
// exists.
func (s *Handler) handleConfigure(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Queue     *string          `json:"queue"`
		Namespace *string          `json:"namespace"`
		Task      *string          `json:"task"`
		Options   *db.QueueOptions `json:"options"`
	}
	opts, err := s.Store.QueueDefaults(r.Context())
	if err != nil {
		s.fail(w, r, "configure", err)
		return
	}
	body.Options = &opts
	if err := httpx.ReadJSON(r, &body); err != nil {
		httpx.Fail(w, err)
		return
	}
	if body.Options == nil { // "options": null
		body.Options = &opts
	}
	if body.Queue == nil {
		httpx.Fail(w, httpx.BadRequest("queue is required"))
		return
	}
	// Queen accepts the empty name on configure, and its load test relies
	// on it (queue-admin-api.md §9); everywhere else the name rule holds.
	if *body.Queue != "" {
		if err := catalog.CheckNames(*body.Queue, catalog.DefaultPartition); err != nil {
			s.fail(w, r, "configure", err)
			return
		}
	}
	if body.Namespace != nil && *body.Namespace != "" || body.Task != nil && *body.Task != "" {
		var ns, task string
		if body.Namespace != nil {
			ns = *body.Namespace
		}
		if body.Task != nil {
			task = *body.Task
		}
		if err := httpx.CheckTexts("namespace", ns, "task", task); err != nil {
			httpx.Fail(w, err)
			return
		}
	}
	if err := checkOptions(body.Options); err != nil {
		httpx.Fail(w, err)
		return
	}
	tenant := auth.FromContext(r.Context()).Tenant
	o := body.Options
	queueID, partitionID, err := s.Store.Configure(r.Context(), tenant, *body.Queue, body.Namespace, body.Task, o)
	if err != nil {
		s.fail(w, r, "configure", err)
		return
	}
	echo := *o
	if echo.DedupWindowSeconds == nil { // the window it is held to
		def := int(s.DedupWindow / time.Second)
		echo.DedupWindowSeconds = &def
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"configured": true, "queueId": queueID, "partitionId": partitionID, "queue": *body.Queue,
		"namespace": body.Namespace, "task": body.Task, "options": echo,
	})
}

// handleDelete is DELETE /api/v1/resources/queues/{queue} (queuestore.DeleteQueue).
func (s *Handler) handleDelete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if err := httpx.CheckText("queue", name); err != nil {
		httpx.Fail(w, err)
		return
	}
	tenant := auth.FromContext(r.Context()).Tenant
	existed, err := s.Store.DeleteQueue(r.Context(), tenant, name)
	if err != nil {
		s.fail(w, r, "delete queue", err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"deleted": true, "queue": name, "existed": existed})
}
