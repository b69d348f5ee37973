package queue_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

// BenchmarkPopOneBusyPartition pops (batch 1, autoAck) from a queue whose
// only partition with data is "busy", beside a number of idle partitions
// that were consumed to the end. The hot list must make the idle ones free:
// the contract is that 100,000 idle partitions pop within 20% of none.
//
//	go test ./broker/api/queue -run '^$' -bench PopOneBusyPartition -benchtime 3000x
func BenchmarkPopOneBusyPartition(b *testing.B) {
	for _, idle := range []int{0, 100000} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			br := brokertest.Shared(b)
			q := br.Q("q")
			if idle > 0 {
				br.Call(b, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q})
				br.AddPartitions(b, q, idle)
				if err := br.DB.AtRest(b.Context(), br.Tenant, q, dbtest.QueueMode); err != nil {
					b.Fatal(err)
				}
			}
			for pushed := 0; pushed < b.N+1; pushed += 1000 {
				resp := br.Do(b, "POST", "/api/v1/push", "", map[string]any{"items": brokertest.Numbered(q, "busy", pushed, 1000)})
				if resp.Status != http.StatusCreated {
					b.Fatalf("push: %d %s", resp.Status, resp.Body)
				}
			}
			pop := func() {
				if resp := br.Do(b, "GET", "/api/v1/pop/queue/"+q+"?autoAck=true", "", nil); resp.Status != http.StatusOK {
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

// BenchmarkPush measures POST /api/v1/push as Queen's JS client sends it,
// every item with a transactionId: one item, and a batch of 100. Encoding
// the bodies is not timed.
//
//	go test ./broker/api/queue -run '^$' -bench BenchmarkPush -benchmem
func BenchmarkPush(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			br := brokertest.Shared(b)
			q := br.Q("q")
			sent := 0
			for b.Loop() {
				b.StopTimer()
				items := make([]map[string]any, n)
				for i := range items {
					items[i] = map[string]any{"queue": q, "partition": "p", "payload": map[string]any{"n": sent},
						"transactionId": fmt.Sprintf("tx-%d", sent)}
					sent++
				}
				body, err := json.Marshal(map[string]any{"items": items})
				if err != nil {
					b.Fatal(err)
				}
				req, err := http.NewRequest("POST", br.URL+"/api/v1/push", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				if br.Token != "" {
					req.Header.Set("Authorization", "Bearer "+br.Token)
				}
				b.StartTimer()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				out, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusCreated {
					b.Fatalf("push answered %d %s (%v)", resp.StatusCode, out, err)
				}
			}
		})
	}
}
