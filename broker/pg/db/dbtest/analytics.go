package dbtest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// QueueMinute is one replica's counters of a tenant's queue over a minute,
// as the broker's flush leaves them; those not named here are zero when
// put.
type QueueMinute struct {
	Tenant, Queue, Replica       string
	Minute                       time.Time // truncated to its minute
	PushRequests, PushMessages   int64
	PopRequests, PopMessages     int64
	LagSumMs, LagCount, LagMaxMs int64
}

// PutQueueMinutes writes minutes of counters, as flushes long ago would,
// in one round trip however many.
func (d *DB) PutQueueMinutes(ctx context.Context, ms ...QueueMinute) error {
	rows := make([][]any, len(ms))
	for i, m := range ms {
		rows[i] = []any{m.Tenant, m.Minute.Truncate(time.Minute), m.Queue, m.Replica, m.PushRequests, m.PushMessages,
			m.PopRequests, m.PopMessages, m.LagSumMs, m.LagCount, m.LagMaxMs}
	}
	_, err := d.pool.CopyFrom(ctx, pgx.Identifier{"queen", "queue_minutes"}, []string{"tenant", "minute", "queue", "replica",
		"push_requests", "push_messages", "pop_requests", "pop_messages", "lag_sum_ms", "lag_count", "lag_max_ms"}, pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("put %d minutes of queue counters: %w", len(ms), err)
	}
	return nil
}

// QueueMinutes lists every minute of counters the database holds, by
// tenant, queue, replica and minute: for a test of the flush on a database
// of its own.
func (d *DB) QueueMinutes(ctx context.Context) ([]QueueMinute, error) {
	rows, err := d.pool.Query(ctx, `SELECT tenant, queue, replica, minute, push_requests, push_messages, pop_requests, pop_messages,
		       lag_sum_ms, lag_count, lag_max_ms
		  FROM queen.queue_minutes ORDER BY tenant, queue, replica, minute`)
	if err != nil {
		return nil, fmt.Errorf("read the queue minutes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueMinute, error) {
		var m QueueMinute
		err := r.Scan(&m.Tenant, &m.Queue, &m.Replica, &m.Minute, &m.PushRequests, &m.PushMessages, &m.PopRequests, &m.PopMessages,
			&m.LagSumMs, &m.LagCount, &m.LagMaxMs)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the queue minutes: %w", err)
	}
	return out, nil
}

// ForgetQueueMinute deletes the counters of a tenant's queue of the
// minute that holds at, as the retention sweep does once they are too old.
func (d *DB) ForgetQueueMinute(ctx context.Context, tenant, queue string, at time.Time) error {
	tag, err := d.pool.Exec(ctx, `DELETE FROM queen.queue_minutes
		 WHERE tenant = $1 AND queue = $2 AND minute = date_trunc('minute', $3::timestamptz)`, tenant, queue, at)
	if err != nil {
		return fmt.Errorf("forget the minute %s of %q: %w", at, queue, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("forget the minute %s of %q: there is none", at, queue)
	}
	return nil
}

// GroupMinute is a consumer group's lag on a tenant's queue, as sampled
// at a minute.
type GroupMinute struct {
	Tenant, Queue, Group string
	Minute               time.Time
	Lag                  int64   // messages behind
	LagSeconds           float64 // the age of the oldest of them
}

// PutGroupMinute writes a sample of a group's lag, as the sampler would.
func (d *DB) PutGroupMinute(ctx context.Context, m GroupMinute) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO queen.group_minutes (tenant, queue, consumer_group, minute, lag, lag_seconds)
		VALUES ($1, $2, $3, $4, $5, $6)`, m.Tenant, m.Queue, m.Group, m.Minute, m.Lag, m.LagSeconds)
	if err != nil {
		return fmt.Errorf("put a lag sample of group %s on %q: %w", m.Group, m.Queue, err)
	}
	return nil
}

// RetentionEvent is what retention records when it deletes messages of a
// tenant's queue; kind is retention, completed_retention or eviction.
type RetentionEvent struct {
	Tenant, Queue, Kind string
	At                  time.Time
	Messages            int64
}

// PutRetentionEvent records a retention event, as a sweep at e.At would,
// on a partition of its own.
func (d *DB) PutRetentionEvent(ctx context.Context, e RetentionEvent) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO queen.retention_events (tenant, at, queue, partition_id, kind, messages)
		VALUES ($1, $2, $3, gen_random_uuid(), $4, $5)`, e.Tenant, e.At, e.Queue, e.Kind, e.Messages)
	if err != nil {
		return fmt.Errorf("put a retention event of %q: %w", e.Queue, err)
	}
	return nil
}

// Traces counts what a tenant's traces hold.
type Traces struct {
	Traces   int // on the messages of the tenant's queues
	Names    int // the tenant's trace name rows
	Messages int // the distinct messages (offsets) traced
}

// Traces counts the traces of a tenant.
func (d *DB) Traces(ctx context.Context, tenant string) (Traces, error) {
	var out Traces
	err := d.pool.QueryRow(ctx, `WITH t AS (SELECT t.partition_id, t.message_offset FROM queen.traces t
		  JOIN queen.partitions p ON p.id = t.partition_id JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant = $1)
		SELECT (SELECT count(*) FROM t), (SELECT count(*) FROM queen.trace_names WHERE tenant = $1),
		       (SELECT count(DISTINCT (partition_id, message_offset)) FROM t)`, tenant).Scan(&out.Traces, &out.Names, &out.Messages)
	if err != nil {
		return Traces{}, fmt.Errorf("count the traces of tenant %q: %w", tenant, err)
	}
	return out, nil
}

// QueryMinute is a streams query's cycles over a minute on one replica.
type QueryMinute struct {
	Tenant, QueryID, Replica string
	Minute                   time.Time
	Cycles, Refused          int64
}

// PutQueryMinute writes a minute of a query's cycle counters, as the
// cycle's flush would.
func (d *DB) PutQueryMinute(ctx context.Context, m QueryMinute) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO queen_streams.query_minutes (tenant, query_id, minute, replica, cycles, refused)
		VALUES ($1, $2, $3, $4, $5, $6)`, m.Tenant, m.QueryID, m.Minute, m.Replica, m.Cycles, m.Refused)
	if err != nil {
		return fmt.Errorf("put a minute of query %s: %w", m.QueryID, err)
	}
	return nil
}

// QueryMinutes lists every minute of cycle counters the database holds, by
// tenant, query, replica and minute.
func (d *DB) QueryMinutes(ctx context.Context) ([]QueryMinute, error) {
	rows, err := d.pool.Query(ctx, `SELECT tenant, query_id::text, replica, minute, cycles, refused
		  FROM queen_streams.query_minutes ORDER BY tenant, query_id, replica, minute`)
	if err != nil {
		return nil, fmt.Errorf("read the query minutes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueryMinute, error) {
		var m QueryMinute
		err := r.Scan(&m.Tenant, &m.QueryID, &m.Replica, &m.Minute, &m.Cycles, &m.Refused)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the query minutes: %w", err)
	}
	return out, nil
}

// Sample is what a replica recorded of itself.
type Sample struct {
	SampledAt         time.Time
	RSSBytes, Virtual int64
	PoolSize          int
}

// Samples lists a replica's samples of itself, oldest first.
func (d *DB) Samples(ctx context.Context, replica string) ([]Sample, error) {
	rows, err := d.pool.Query(ctx, `SELECT sampled_at, rss_bytes, virtual_bytes, pool_size FROM queen.replica_samples
		 WHERE replica = $1 ORDER BY sampled_at`, replica)
	if err != nil {
		return nil, fmt.Errorf("read the samples of replica %q: %w", replica, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Sample, error) {
		var s Sample
		err := r.Scan(&s.SampledAt, &s.RSSBytes, &s.Virtual, &s.PoolSize)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the samples of replica %q: %w", replica, err)
	}
	return out, nil
}
