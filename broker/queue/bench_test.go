package queue_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/regent-mq/regent/test/brokertest"
)

// BenchmarkPopOneBusyPartition pops (batch 1, autoAck) from a queue whose
// only partition with data is "busy", beside a number of idle partitions
// that were consumed to the end. The hot list must make the idle ones free:
// the contract is that 100,000 idle partitions pop within 20% of none.
//
//	go test ./broker/queue -run '^$' -bench PopOneBusyPartition -benchtime 3000x
func BenchmarkPopOneBusyPartition(b *testing.B) {
	for _, idle := range []int{0, 100000} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			br := brokertest.Start(b)
			if idle > 0 {
				_, err := br.Pool.Exec(b.Context(), fmt.Sprintf(`INSERT INTO queen.queues (id, name) VALUES (gen_random_uuid(), 'q');
					INSERT INTO queen.partitions (id, queue_id, name, next_offset)
					SELECT gen_random_uuid(), q.id, 'idle-' || i, 1 FROM queen.queues q, generate_series(1, %d) i;
					INSERT INTO queen.cursors (partition_id, consumer_group, committed)
					SELECT id, '__QUEUE_MODE__', 1 FROM queen.partitions;
					ANALYZE`, idle))
				if err != nil {
					b.Fatal(err)
				}
			}
			for pushed := 0; pushed < b.N+1; pushed += 1000 {
				resp := br.Do(b, "POST", "/api/v1/push", "", map[string]any{"items": brokertest.Numbered("q", "busy", pushed, 1000)})
				if resp.Status != http.StatusCreated {
					b.Fatalf("push: %d %s", resp.Status, resp.Body)
				}
			}
			pop := func() {
				if resp := br.Do(b, "GET", "/api/v1/pop/queue/q?autoAck=true", "", nil); resp.Status != http.StatusOK {
					b.Fatalf("pop: %d %s", resp.Status, resp.Body)
				}
			}
			pop() // seeds this replica's hot list for the group
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				pop()
			}
		})
	}
}
