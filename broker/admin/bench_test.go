package admin_test

import (
	"net/http"
	"testing"

	"github.com/regent-mq/regent/test/brokertest"
)

// BenchmarkConsumerGroupRoutes10kPartitions reads the group routes over one
// queue of 10,000 partitions, each with a segment, and two groups with a
// cursor on every partition: one caught up, one with a message to go.
func BenchmarkConsumerGroupRoutes10kPartitions(b *testing.B) {
	br := brokertest.Start(b)
	if _, err := br.Pool.Exec(b.Context(), `INSERT INTO queen.queues (id, tenant, name) VALUES (gen_random_uuid(), $1, 'q')`, br.Tenant); err != nil {
		b.Fatal(err)
	}
	_, err := br.Pool.Exec(b.Context(), `INSERT INTO queen.partitions (id, queue_id, name, next_offset)
		SELECT gen_random_uuid(), q.id, 'p-' || i, 1 FROM queen.queues q, generate_series(1, 10000) i;
		INSERT INTO queen.log_segments (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
		SELECT id, 0, 1, '\x00', 0, ARRAY['t'], now() - interval '2 hours', now() - interval '2 hours' FROM queen.partitions;
		INSERT INTO queen.cursors (partition_id, consumer_group, committed, last_consumed_at)
		SELECT id, g.name, g.committed, now() FROM queen.partitions, (VALUES ('done', 1), ('behind', 0)) g (name, committed);
		ANALYZE`)
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"/api/v1/consumer-groups", "/api/v1/consumer-groups/lagging?minLagSeconds=3600",
		"/api/v1/consumer-groups/behind"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				if r := br.Do(b, "GET", path, "", nil); r.Status != http.StatusOK {
					b.Fatalf("%s: %d %s", path, r.Status, r.Body)
				}
			}
		})
	}
}
