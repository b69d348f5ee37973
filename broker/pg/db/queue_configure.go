package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/broker/domain/ids"
)

// QueueOptions are a queue's options, with the wire names of queue-api.md.
type QueueOptions struct {
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
	// DedupWindowSeconds is nil for a queue that follows the broker's
	// --dedup-window, the one option whose default is not the schema's.
	DedupWindowSeconds *int   `json:"dedupWindowSeconds"`
	Storage            string `json:"storage"` // rows or segments: stored and echoed only
}

// QueueDefaults returns the options of a queue that sets none: the column
// defaults of queen.queues, which a queue that a push creates takes too,
// so the schema is their one home. An option's column is its JSON name in
// snake case.
func (d *DB) QueueDefaults(ctx context.Context) (QueueOptions, error) {
	rows, err := d.q.Query(ctx, `SELECT a.attname, pg_get_expr(f.adbin, f.adrelid)
		FROM pg_attrdef f JOIN pg_attribute a ON a.attrelid = f.adrelid AND a.attnum = f.adnum
		WHERE f.adrelid = 'queen.queues'::regclass`)
	if err != nil {
		return QueueOptions{}, fmt.Errorf("read the queue option defaults: %w", err)
	}
	defaults := map[string]json.RawMessage{}
	var column, value string
	if _, err := pgx.ForEachRow(rows, []any{&column, &value}, func() error {
		if literal.MatchString(value) {
			defaults[camel(column)] = json.RawMessage(value)
		} else if m := word.FindStringSubmatch(value); m != nil {
			defaults[camel(column)] = json.RawMessage(`"` + m[1] + `"`)
		}
		return nil
	}); err != nil {
		return QueueOptions{}, fmt.Errorf("read the queue option defaults: %w", err)
	}
	b, err := json.Marshal(defaults)
	if err != nil {
		return QueueOptions{}, err
	}
	var o QueueOptions
	if err := json.Unmarshal(b, &o); err != nil {
		return QueueOptions{}, fmt.Errorf("read the queue option defaults: %w", err)
	}
	return o, nil
}

// literal is a default that is a number or a boolean, and word one that is
// a lowercase word: an option's (the tenant's 'default' too, which no option
// is named after). The other columns' defaults (now()) are not options.
var (
	literal = regexp.MustCompile(`^(-?[0-9]+|true|false)$`)
	word    = regexp.MustCompile(`^'([a-z]+)'::text$`)
)

// camel turns a column name into its option's JSON name: lease_time is
// leaseTime.
func camel(column string) string {
	parts := strings.Split(column, "_")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}

// ConfigureQueue creates or updates the queue name of tenant (the options as
// given) and makes sure its partition Default exists. A refusal of the
// tenant's quota comes back as the database raised it (quota.FromSQL reads
// it).
func (d *DB) ConfigureQueue(ctx context.Context, tenant, name string, namespace, task *string, o *QueueOptions) (queueID, partitionID uuid.UUID, err error) {
	b := &pgx.Batch{}
	// The batch is one transaction: the gate's lock holds until the insert
	// commits.
	b.Queue(`SELECT queen.queue_admit(p_tenant => $1, p_queue => $2)`, tenant, name)
	b.Queue(`INSERT INTO queen.queues AS q (id, tenant, name, namespace, task, lease_time, retry_limit, retry_delay,
			max_size, ttl, priority, delayed_processing, window_buffer, retention_seconds,
			completed_retention_seconds, retention_enabled, encryption_enabled, dead_letter_queue,
			dlq_after_max_retries, max_wait_time_seconds, dedup_window_seconds, storage)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)
		ON CONFLICT (tenant, name) DO UPDATE SET namespace = EXCLUDED.namespace, task = EXCLUDED.task,
			lease_time = EXCLUDED.lease_time, retry_limit = EXCLUDED.retry_limit, retry_delay = EXCLUDED.retry_delay,
			max_size = EXCLUDED.max_size, ttl = EXCLUDED.ttl, priority = EXCLUDED.priority,
			delayed_processing = EXCLUDED.delayed_processing, window_buffer = EXCLUDED.window_buffer,
			retention_seconds = EXCLUDED.retention_seconds,
			completed_retention_seconds = EXCLUDED.completed_retention_seconds,
			retention_enabled = EXCLUDED.retention_enabled, encryption_enabled = EXCLUDED.encryption_enabled,
			dead_letter_queue = EXCLUDED.dead_letter_queue, dlq_after_max_retries = EXCLUDED.dlq_after_max_retries,
			max_wait_time_seconds = EXCLUDED.max_wait_time_seconds,
			dedup_window_seconds = EXCLUDED.dedup_window_seconds, storage = EXCLUDED.storage, updated_at = EXCLUDED.updated_at
		RETURNING q.id`,
		ids.New(), tenant, name, namespace, task, o.LeaseTime, o.RetryLimit, o.RetryDelay,
		o.MaxSize, o.TTL, o.Priority, o.DelayedProcessing, o.WindowBuffer, o.RetentionSeconds,
		o.CompletedRetentionSeconds, o.RetentionEnabled, o.EncryptionEnabled, o.DeadLetterQueue,
		o.DLQAfterMaxRetries, o.MaxWaitTimeSeconds, o.DedupWindowSeconds, o.Storage).QueryRow(func(row pgx.Row) error { return row.Scan(&queueID) })
	b.Queue(`SELECT partition_id FROM queen.resolve_partition_v2(p_tenant => $1, p_queue => $2, p_partition => $3,
			p_create => true, p_new_queue_id => NULL, p_new_partition_id => $4)`,
		tenant, name, catalog.DefaultPartition, ids.New()).QueryRow(func(row pgx.Row) error { return row.Scan(&partitionID) })
	if err := d.q.SendBatch(ctx, b).Close(); err != nil {
		return uuid.Nil, uuid.Nil, err
	}
	return queueID, partitionID, nil
}

// DeleteQueue deletes the queue name of tenant with its partitions,
// segments, cursors, subscriptions, dead letters and dedup rows, and
// returns its id, none when it did not exist. Every replica forgets it
// through the NOTIFY on hotlist.Channel.
func (d *DB) DeleteQueue(ctx context.Context, tenant, name string) ([]uuid.UUID, error) {
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
	if err := d.q.SendBatch(ctx, b).Close(); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("delete queue %q: %w", name, err)
	}
	return deleted, nil
}
