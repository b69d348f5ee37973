package db

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/regent-mq/regent/broker/domain/counters"
)

// Window is the time range of an analytics read, with its bucket width;
// Queue and Replica narrow it when not empty, and Queues when not nil.
// PerReplica keeps the replicas' counts apart; otherwise QueueMinutes sums
// them, and with AcrossQueues the queues' too. Parked keeps only the
// minutes in which long-polls were parked.
type Window struct {
	From, To     time.Time
	Width        time.Duration
	Queue        string
	Queues       []string
	Replica      string
	PerReplica   bool
	AcrossQueues bool
	Parked       bool
}

// bucketSQL is the start of the bucket of column, aligned to multiples of
// the width ($2) counted from the Unix epoch.
func bucketSQL(column string) string {
	return `date_bin($2::interval, ` + column + `, '1970-01-01T00:00:00Z')`
}

// QueueMinutes is one (bucket, queue, replica) of the counters, summed over the
// minutes of the bucket.
type QueueMinutes struct {
	Bucket         time.Time
	Queue, Replica string
	N              [counters.Fields]int64
	LagMax         int64
}

// QueueMinutes reads the tenant's counters in the window, by bucket, queue
// (but with w.AcrossQueues) and (with w.PerReplica) replica, ascending. One
// statement: a range scan of queue_minutes' primary key (tenant, minute)
// over minutes × queues × replicas rows of the window.
func (d *DB) QueueMinutes(ctx context.Context, tenant string, w Window) ([]QueueMinutes, error) {
	sums := make([]string, 0, counters.Fields)
	for _, c := range queueMinuteColumns {
		sums = append(sums, "sum("+c+")::bigint")
	}
	return collect(ctx, d, `SELECT `+bucketSQL("minute")+` AS bucket, CASE WHEN $9 THEN '' ELSE queue END,
			CASE WHEN $7 THEN replica ELSE '' END,
			`+strings.Join(sums, ", ")+`, max(lag_max_ms)
		  FROM queen.queue_minutes
		 WHERE tenant = $1 AND minute >= date_trunc('minute', $3::timestamptz) AND minute <= $4
		   AND ($5::text = '' OR queue = $5) AND ($6::text = '' OR replica = $6) AND (NOT $8 OR parked_sum > 0)
		   AND ($10::text[] IS NULL OR queue = ANY($10))
		 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`, "read queue minutes", func(r pgx.CollectableRow) (QueueMinutes, error) {
		var m QueueMinutes
		dest := []any{&m.Bucket, &m.Queue, &m.Replica}
		for i := range m.N {
			dest = append(dest, &m.N[i])
		}
		return m, r.Scan(append(dest, &m.LagMax)...)
	}, tenant, w.Width, w.From, w.To, w.Queue, w.Replica, w.PerReplica, w.Parked,
		w.AcrossQueues, w.Queues)
}

// LagMinute is one queue's pop lag in one minute, summed over replicas.
type LagMinute struct {
	Queue        string
	Minute       time.Time
	Pops, LagSum int64
	LagMax       int64
}

// maxLagRows bounds queue-lag's answer: a day of minutes of 7 queues.
const maxLagRows = 10000

// LagMinutes reads the raw per-minute pop lag of the tenant's queues in the
// window, newest first, at most maxLagRows. One statement: a range scan of
// queue_minutes' primary key.
func (d *DB) LagMinutes(ctx context.Context, tenant string, w Window) ([]LagMinute, error) {
	return collect(ctx, d, `SELECT queue, minute, sum(lag_count)::bigint, sum(lag_sum_ms)::bigint, max(lag_max_ms)
		  FROM queen.queue_minutes
		 WHERE tenant = $1 AND minute >= date_trunc('minute', $2::timestamptz) AND minute <= $3
		   AND ($4::text = '' OR queue = $4) AND lag_count > 0
		 GROUP BY queue, minute ORDER BY minute DESC, queue LIMIT $5`, "read queue lag", func(r pgx.CollectableRow) (LagMinute, error) {
		var m LagMinute
		return m, r.Scan(&m.Queue, &m.Minute, &m.Pops, &m.LagSum, &m.LagMax)
	}, tenant, w.From, w.To, w.Queue, maxLagRows)
}

// PartitionsCreated counts the partitions of the tenant's named queues by
// the bucket they were created in (Unix seconds of its start); partitions created before the window
// fall in its first bucket. One statement: the queues by (tenant, name),
// their partitions by the (queue_id, name) index.
func (d *DB) PartitionsCreated(ctx context.Context, tenant string, w Window, queues []string) (map[string]map[int64]int64, error) {
	rows, err := d.q.Query(ctx, `SELECT q.name, `+bucketSQL("greatest(p.created_at, $3)")+`, count(*)
		  FROM queen.queues q JOIN queen.partitions p ON p.queue_id = q.id
		 WHERE q.tenant = $1 AND q.name = ANY($4) AND p.created_at <= $5
		 GROUP BY 1, 2`, tenant, w.Width, w.From, queues, w.To)
	if err != nil {
		return nil, fmt.Errorf("count partitions created: %w", err)
	}
	out := map[string]map[int64]int64{}
	var q string
	var b time.Time
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&q, &b, &n}, func() error {
		if out[q] == nil {
			out[q] = map[int64]int64{}
		}
		out[q][b.Unix()] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count partitions created: %w", err)
	}
	return out, nil
}

// StoredCounts counts the tenant's messages still stored by the bucket of their
// creation (Unix seconds of its start) (segment granularity: a segment is one push request), filtered
// by queue, namespace and task when not empty. One statement: the
// segments whose time range meets the window, found through the BRIN
// index on max_created_at, joined to their partitions and queues.
func (d *DB) StoredCounts(ctx context.Context, tenant string, w Window, namespace, task string) (map[int64]int64, error) {
	rows, err := d.q.Query(ctx, `SELECT `+bucketSQL("s.min_created_at")+`, sum(s.frame_count)::bigint
		  FROM queen.log_segments s
		  JOIN queen.partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND s.max_created_at >= $3 AND s.min_created_at < $4
		   AND ($5::text = '' OR q.name = $5) AND ($6::text = '' OR q.namespace = $6) AND ($7::text = '' OR q.task = $7)
		 GROUP BY 1`, tenant, w.Width, w.From, w.To, w.Queue, namespace, task)
	if err != nil {
		return nil, fmt.Errorf("count stored messages: %w", err)
	}
	out := map[int64]int64{}
	var b time.Time
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&b, &n}, func() error { out[b.Unix()] = n; return nil })
	if err != nil {
		return nil, fmt.Errorf("count stored messages: %w", err)
	}
	return out, nil
}

// RetentionBucket is what retention removed in one bucket.
type RetentionBucket struct {
	Bucket                        time.Time
	Retention, Completed, Evicted int64
	Events                        int64
}

// RetentionBuckets reads the tenant's retention events in the window by bucket,
// ascending. One statement: a range scan of retention_events (tenant, at).
func (d *DB) RetentionBuckets(ctx context.Context, tenant string, w Window) ([]RetentionBucket, error) {
	return collect(ctx, d, `SELECT `+bucketSQL("at")+`,
			coalesce(sum(messages) FILTER (WHERE kind = 'retention'), 0)::bigint,
			coalesce(sum(messages) FILTER (WHERE kind = 'completed_retention'), 0)::bigint,
			coalesce(sum(messages) FILTER (WHERE kind = 'eviction'), 0)::bigint,
			count(*)
		  FROM queen.retention_events
		 WHERE tenant = $1 AND at >= $3 AND at <= $4 AND ($5::text = '' OR queue = $5)
		 GROUP BY 1 ORDER BY 1`, "read retention events", func(r pgx.CollectableRow) (RetentionBucket, error) {
		var b RetentionBucket
		return b, r.Scan(&b.Bucket, &b.Retention, &b.Completed, &b.Evicted, &b.Events)
	}, tenant, w.Width, w.From, w.To, w.Queue)
}

// ReplicaSample is one replica's sample of one minute.
type ReplicaSample struct {
	Replica                        string
	Minute, SampledAt              time.Time
	CPUUser, CPUSys                float64
	RSS, Virtual                   int64
	PoolSize, PoolIdle, PoolActive int64
}

// ReplicaSamples reads the replicas' samples in the window (of one replica when
// w.Replica is set), by replica and minute. One statement: a range scan of
// replica_samples' primary key (minute, replica), one row per replica and
// minute.
func (d *DB) ReplicaSamples(ctx context.Context, w Window) ([]ReplicaSample, error) {
	return collect(ctx, d, `SELECT replica, minute, sampled_at, cpu_user_pct, cpu_sys_pct, rss_bytes, virtual_bytes,
			pool_size, pool_idle, pool_active
		  FROM queen.replica_samples
		 WHERE minute >= date_trunc('minute', $1::timestamptz) AND minute <= $2 AND ($3::text = '' OR replica = $3)
		 ORDER BY replica, minute`, "read replica samples", func(r pgx.CollectableRow) (ReplicaSample, error) {
		var x ReplicaSample
		return x, r.Scan(&x.Replica, &x.Minute, &x.SampledAt, &x.CPUUser, &x.CPUSys, &x.RSS, &x.Virtual,
			&x.PoolSize, &x.PoolIdle, &x.PoolActive)
	}, w.From, w.To, w.Replica)
}
