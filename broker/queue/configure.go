package queue

import (
	"errors"
	"math"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/regent-mq/regent/broker/auth"
	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/broker/httpx"
	"github.com/regent-mq/regent/broker/log"
	"github.com/regent-mq/regent/broker/pg"
)

// Options are a queue's options, with the wire names of queue-api.md.
type Options struct {
	LeaseTime                 int  `json:"leaseTime"`
	RetryLimit                int  `json:"retryLimit"`
	RetryDelay                int  `json:"retryDelay"`
	MaxSize                   int  `json:"maxSize"`
	TTL                       int  `json:"ttl"`
	Priority                  int  `json:"priority"`
	DelayedProcessing         int  `json:"delayedProcessing"`
	WindowBuffer              int  `json:"windowBuffer"`
	RetentionSeconds          int  `json:"retentionSeconds"`
	CompletedRetentionSeconds int  `json:"completedRetentionSeconds"`
	RetentionEnabled          bool `json:"retentionEnabled"`
	EncryptionEnabled         bool `json:"encryptionEnabled"`
	DeadLetterQueue           bool `json:"deadLetterQueue"`
	DLQAfterMaxRetries        bool `json:"dlqAfterMaxRetries"`
	MaxWaitTimeSeconds        int  `json:"maxWaitTimeSeconds"`
}

// DefaultOptions are the options of a queue that sets none.
var DefaultOptions = Options{LeaseTime: 300, RetryLimit: 3, RetryDelay: 1000, TTL: 3600}

// check refuses values no queue can have. Every integer option is stored
// as a 32-bit integer.
func (o *Options) check() error {
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
	return nil
}

// handleConfigure is POST /api/v1/configure: create or update a queue (the
// options not given take their defaults) and make sure partition Default
// exists.
func (s *Store) handleConfigure(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Queue     *string  `json:"queue"`
		Namespace *string  `json:"namespace"`
		Task      *string  `json:"task"`
		Options   *Options `json:"options"`
	}
	opts := DefaultOptions
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
		if err := log.CheckNames(*body.Queue, log.DefaultPartition); err != nil {
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
	if err := body.Options.check(); err != nil {
		httpx.Fail(w, err)
		return
	}
	tenant := auth.FromContext(r.Context()).Tenant
	o := body.Options
	var queueID, partitionID uuid.UUID
	b := &pgx.Batch{}
	// The batch is one transaction: the gate's lock holds until the insert
	// commits.
	b.Queue(`SELECT queen.queue_admit(p_tenant => $1, p_queue => $2)`, tenant, *body.Queue)
	b.Queue(`INSERT INTO queen.queues AS q (id, tenant, name, namespace, task, lease_time, retry_limit, retry_delay,
			max_size, ttl, priority, delayed_processing, window_buffer, retention_seconds,
			completed_retention_seconds, retention_enabled, encryption_enabled, dead_letter_queue,
			dlq_after_max_retries, max_wait_time_seconds)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
		ON CONFLICT (tenant, name) DO UPDATE SET namespace = EXCLUDED.namespace, task = EXCLUDED.task,
			lease_time = EXCLUDED.lease_time, retry_limit = EXCLUDED.retry_limit, retry_delay = EXCLUDED.retry_delay,
			max_size = EXCLUDED.max_size, ttl = EXCLUDED.ttl, priority = EXCLUDED.priority,
			delayed_processing = EXCLUDED.delayed_processing, window_buffer = EXCLUDED.window_buffer,
			retention_seconds = EXCLUDED.retention_seconds,
			completed_retention_seconds = EXCLUDED.completed_retention_seconds,
			retention_enabled = EXCLUDED.retention_enabled, encryption_enabled = EXCLUDED.encryption_enabled,
			dead_letter_queue = EXCLUDED.dead_letter_queue, dlq_after_max_retries = EXCLUDED.dlq_after_max_retries,
			max_wait_time_seconds = EXCLUDED.max_wait_time_seconds, updated_at = now()
		RETURNING q.id`,
		pg.NewID(), tenant, *body.Queue, body.Namespace, body.Task, o.LeaseTime, o.RetryLimit, o.RetryDelay,
		o.MaxSize, o.TTL, o.Priority, o.DelayedProcessing, o.WindowBuffer, o.RetentionSeconds,
		o.CompletedRetentionSeconds, o.RetentionEnabled, o.EncryptionEnabled, o.DeadLetterQueue,
		o.DLQAfterMaxRetries, o.MaxWaitTimeSeconds).QueryRow(func(row pgx.Row) error { return row.Scan(&queueID) })
	b.Queue(`SELECT partition_id FROM queen.resolve_partition_v2(p_tenant => $1, p_queue => $2, p_partition => $3,
			p_create => true, p_new_queue_id => NULL, p_new_partition_id => $4)`,
		tenant, *body.Queue, log.DefaultPartition, pg.NewID()).QueryRow(func(row pgx.Row) error { return row.Scan(&partitionID) })
	if err := s.pool.SendBatch(r.Context(), b).Close(); err != nil {
		s.fail(w, r, "configure", s.log.Quotas().FromSQL(tenant, err))
		return
	}
	s.log.Invalidate(tenant, *body.Queue)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"configured": true, "queueId": queueID, "partitionId": partitionID, "queue": *body.Queue,
		"namespace": body.Namespace, "task": body.Task, "options": o,
	})
}

// handleDelete is DELETE /api/v1/resources/queues/{queue}: the queue with its
// partitions, segments, cursors, subscriptions, dead letters and dedup rows.
// Every replica forgets it through the NOTIFY.
func (s *Store) handleDelete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if err := httpx.CheckText("queue", name); err != nil {
		httpx.Fail(w, err)
		return
	}
	tenant := auth.FromContext(r.Context()).Tenant
	var deleted []uuid.UUID
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM queen.push_dedup d USING queen.partitions p, queen.queues q
		WHERE d.partition_id = p.id AND p.queue_id = q.id AND q.tenant = $1 AND q.name = $2`, tenant, name)
	b.Queue(`WITH d AS (DELETE FROM queen.queues WHERE tenant = $1 AND name = $2 RETURNING id)
		SELECT id, pg_notify($3, id::text || ':') FROM d`, tenant, name, hotlist.Channel).
		Query(func(rows pgx.Rows) error {
			var err error
			deleted, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (uuid.UUID, error) {
				var id uuid.UUID
				return id, row.Scan(&id, nil)
			})
			return err
		})
	if err := s.pool.SendBatch(r.Context(), b).Close(); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		s.fail(w, r, "delete queue", err)
		return
	}
	s.log.Invalidate(tenant, name)
	for _, id := range deleted {
		s.hot.Forget(id)
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"deleted": true, "queue": name, "existed": len(deleted) > 0})
}
