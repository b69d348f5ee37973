package admin_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/segment"
	"github.com/regent-mq/regent/test/brokertest"
)

// BenchmarkReadRoutes10kPartitions reads the consumer-group, resources,
// status and messages routes over one queue of 10,000 partitions, each with
// a one-message segment of two hours ago, and two groups with a cursor on
// every partition: one caught up, one with the message to go.
func BenchmarkReadRoutes10kPartitions(b *testing.B) {
	br := brokertest.Start(b)
	created := time.Now().Add(-2 * time.Hour)
	body, sum := segment.Encode(nil, []segment.Frame{{ID: uuid.New(), TransactionID: "t", CreatedAt: created.UnixMicro(), Payload: []byte("1")}})
	if _, err := br.Pool.Exec(b.Context(), `INSERT INTO queen.queues (id, tenant, name) VALUES (gen_random_uuid(), $1, 'q')`, br.Tenant); err != nil {
		b.Fatal(err)
	}
	if _, err := br.Pool.Exec(b.Context(), `INSERT INTO queen.partitions (id, queue_id, name, next_offset)
		SELECT gen_random_uuid(), q.id, 'p-' || i, 1 FROM queen.queues q, generate_series(1, 10000) i`); err != nil {
		b.Fatal(err)
	}
	if _, err := br.Pool.Exec(b.Context(), `INSERT INTO queen.log_segments (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
		SELECT id, 0, 1, $1, $2, ARRAY['t'], $3, $3 FROM queen.partitions`, body, int64(sum), created); err != nil {
		b.Fatal(err)
	}
	_, err := br.Pool.Exec(b.Context(), `INSERT INTO queen.cursors (partition_id, consumer_group, committed, last_consumed_at)
		SELECT id, g.name, g.committed, now() FROM queen.partitions, (VALUES ('done', 1), ('behind', 0)) g (name, committed);
		ANALYZE`)
	if err != nil {
		b.Fatal(err)
	}
	window := "from=" + created.Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, path := range []string{"/api/v1/consumer-groups", "/api/v1/consumer-groups/lagging?minLagSeconds=3600",
		"/api/v1/consumer-groups/behind",
		"/api/v1/resources/overview", "/api/v1/resources/queues", "/api/v1/resources/queues/q", "/api/v1/resources/namespaces",
		"/api/v1/status", "/api/v1/status/queues", "/api/v1/status/queues/q",
		"/api/v1/messages?" + window, "/api/v1/status/queues/q/messages"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				if r := br.Do(b, "GET", path, "", nil); r.Status != http.StatusOK {
					b.Fatalf("%s: %d %s", path, r.Status, r.Body)
				}
			}
		})
	}
}
