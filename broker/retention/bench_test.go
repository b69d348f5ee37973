package retention_test

import (
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
)

// BenchmarkSweeps10kPartitions runs each sweep over a queue of 10,000
// partitions, each holding one young segment and a caught-up cursor, with
// every rule on and nothing to delete: the cost every replica's turn pays
// at each interval once the backlog is gone.
func BenchmarkSweeps10kPartitions(b *testing.B) {
	br := brokertest.Start(b)
	_, err := br.Pool.Exec(b.Context(), `INSERT INTO queen.queues (id, tenant, name, retention_enabled,
			retention_seconds, completed_retention_seconds, max_wait_time_seconds)
		VALUES (gen_random_uuid(), $1, 'q', true, 3600, 3600, 3600)`, br.Tenant)
	if err != nil {
		b.Fatal(err)
	}
	_, err = br.Pool.Exec(b.Context(), `INSERT INTO queen.partitions (id, queue_id, name, next_offset, last_push_at)
		SELECT gen_random_uuid(), q.id, 'p-' || i, 1, now() FROM queen.queues q, generate_series(1, 10000) i;
		INSERT INTO queen.log_segments (partition_id, base_offset, frame_count, body, checksum, txids, min_created_at, max_created_at)
		SELECT id, 0, 1, '\x00', 0, ARRAY['t'], now(), now() FROM queen.partitions;
		INSERT INTO queen.cursors (partition_id, consumer_group, committed, last_consumed_at)
		SELECT id, 'g', 1, now() FROM queen.partitions;
		ANALYZE`)
	if err != nil {
		b.Fatal(err)
	}
	sw := sweeper(br, time.Hour)
	b.Run("retention", func(b *testing.B) {
		for b.Loop() {
			if _, err := sw.Sweep(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("eviction", func(b *testing.B) {
		for b.Loop() {
			if _, err := sw.Evict(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
