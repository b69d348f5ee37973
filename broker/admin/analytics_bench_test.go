package admin_test

import (
	"net/http"
	"testing"

	"github.com/regent-mq/regent/test/brokertest"
)

// BenchmarkAnalyticsRoutes10kPartitions reads the analytics routes as a
// dashboard polls them, over one queue of 10,000 partitions, each with a
// segment of the last hour, and an hour of counters of 20 queues on 3
// replicas (3,600 rows of queue_minutes). With ninetyDays, one more queue
// was busy every minute of the 90 days that the counters are kept (129,600
// rows more): what status and overview's lifetime totals scan.
func BenchmarkAnalyticsRoutes10kPartitions(b *testing.B) {
	b.Run("an hour", func(b *testing.B) { benchAnalytics(b, false) })
	b.Run("ninety days", func(b *testing.B) { benchAnalytics(b, true) })
}

func benchAnalytics(b *testing.B, ninetyDays bool) {
	br := brokertest.Start(b)
	seed := []string{
		`INSERT INTO queen.queues (id, tenant, name) VALUES (gen_random_uuid(), $1, 'q')`,
		`INSERT INTO queen.partitions (id, queue_id, name, next_offset, created_at)
		 SELECT gen_random_uuid(), q.id, 'p-' || i, 1, now() - interval '2 hours'
		   FROM queen.queues q, generate_series(1, 10000) i WHERE q.tenant = $1`,
		`INSERT INTO queen.log_segments (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
		 SELECT p.id, 0, 1, '\x00', 0, ARRAY['t'], now() - random() * interval '55 minutes', now()
		   FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant = $1`,
		`INSERT INTO queen.queue_minutes (tenant, minute, queue, replica, push_requests, push_messages, pop_messages,
		        lag_sum_ms, lag_count, lag_max_ms)
		 SELECT $1, date_trunc('minute', now()) - m * interval '1 minute', CASE WHEN q = 1 THEN 'q' ELSE 'q' || q END,
		        'r' || r, 10, 100, 90, 900, 90, 30
		   FROM generate_series(0, 59) m, generate_series(1, 20) q, generate_series(1, 3) r`,
	}
	if ninetyDays {
		seed = append(seed, `INSERT INTO queen.queue_minutes (tenant, minute, queue, replica, push_requests, push_messages,
		        pop_requests, pop_messages, ack_requests, ack_success, lag_sum_ms, lag_count, lag_max_ms)
		 SELECT $1, date_trunc('minute', now()) - m * interval '1 minute', 'busy', 'r1', 10, 100, 10, 100, 10, 100, 900, 100, 30
		   FROM generate_series(0, 90*1440 - 1) m`)
	}
	for _, sql := range seed {
		if _, err := br.Pool.Exec(b.Context(), sql, br.Tenant); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := br.Pool.Exec(b.Context(), `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"/api/v1/analytics/queue-ops", "/api/v1/analytics/queue-ops?queue=q",
		"/api/v1/analytics/worker-metrics", "/api/v1/analytics/queue-lag", "/api/v1/analytics/queue-parked-replicas",
		"/api/v1/status/analytics", "/api/v1/status/analytics?interval=minute", "/api/v1/analytics/postgres-stats",
		"/api/v1/status", "/api/v1/resources/overview"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				if r := br.Do(b, "GET", path, "", nil); r.Status != http.StatusOK {
					b.Fatalf("%s: %d %s", path, r.Status, r.Body)
				}
			}
		})
	}
}

// BenchmarkTraceOfAMessageIn10kSegments records traces on a partition of
// 10,000 segments: on a message of the group's current batch, and on one
// that no batch of the group holds.
func BenchmarkTraceOfAMessageIn10kSegments(b *testing.B) {
	br := brokertest.Start(b)
	var pid string
	if err := br.Pool.QueryRow(b.Context(), `WITH q AS (INSERT INTO queen.queues (id, tenant, name) VALUES (gen_random_uuid(), $1, 'q') RETURNING id)
		INSERT INTO queen.partitions (id, queue_id, name, next_offset) SELECT gen_random_uuid(), q.id, 'p', 10000 FROM q
		RETURNING id::text`, br.Tenant).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	for _, sql := range []string{
		`INSERT INTO queen.log_segments (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
		 SELECT $1, i, 1, '\x00', 0, ARRAY['t' || i], now(), now() FROM generate_series(0, 9999) i`,
		`INSERT INTO queen.cursors (partition_id, consumer_group, committed, batch_start, batch_end, lease_id, lease_expires_at)
		 VALUES ($1, 'g', 9990, 9990, 10000, gen_random_uuid(), now() + interval '1 hour')`,
		`ANALYZE`,
	} {
		args := []any{pid}
		if sql == `ANALYZE` {
			args = nil
		}
		if _, err := br.Pool.Exec(b.Context(), sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	for name, tx := range map[string]string{"in the batch": "t9995", "outside it": "t10"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				r := br.Do(b, "POST", "/api/v1/traces", "", map[string]any{"transactionId": tx, "partitionId": pid,
					"consumerGroup": "g", "data": map[string]any{}})
				if r.Status != http.StatusCreated {
					b.Fatalf("%d %s", r.Status, r.Body)
				}
			}
		})
	}
}
