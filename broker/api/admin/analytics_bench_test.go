package admin_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
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
	br := start(b) // a database that holds only what it arranges, as make bench has measured
	br.Call(b, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "q"})
	now := time.Now()
	// Each partition's message lies somewhere in the last 55 minutes.
	must(b, br.DB.Spread(b.Context(), br.Tenant, "q", spread(10000, "t", func(i int) time.Time {
		return now.Add(-time.Duration(i) * 55 * time.Minute / 10000)
	})))
	var minutes []dbtest.QueueMinute
	for m := range 60 {
		for q := 1; q <= 20; q++ {
			for r := 1; r <= 3; r++ {
				minutes = append(minutes, dbtest.QueueMinute{Tenant: br.Tenant, Queue: map[bool]string{true: "q", false: fmt.Sprint("q", q)}[q == 1],
					Replica: fmt.Sprint("r", r), Minute: now.Add(-time.Duration(m) * time.Minute), PushRequests: 10, PushMessages: 100,
					PopMessages: 90, LagSumMs: 900, LagCount: 90, LagMaxMs: 30})
			}
		}
	}
	if ninetyDays {
		for m := range 90 * 1440 {
			minutes = append(minutes, dbtest.QueueMinute{Tenant: br.Tenant, Queue: "busy", Replica: "r1", Minute: now.Add(-time.Duration(m) * time.Minute),
				PushRequests: 10, PushMessages: 100, PopRequests: 10, PopMessages: 100, LagSumMs: 900, LagCount: 100, LagMaxMs: 30})
		}
	}
	must(b, br.DB.PutQueueMinutes(b.Context(), minutes...))
	must(b, br.DB.Analyze(b.Context()))
	for _, path := range []string{"/api/v1/analytics/queue-ops", "/api/v1/analytics/queue-ops?queue=q",
		"/api/v1/analytics/worker-metrics", "/api/v1/analytics/queue-lag", "/api/v1/analytics/queue-parked-replicas",
		"/api/v1/status/analytics", "/api/v1/status/analytics?interval=minute", "/api/v1/analytics/postgres-stats",
		"/api/v1/status", "/api/v1/resources/overview"} {
		b.Run(path, func(b *testing.B) { benchGet(b, br, path) })
	}
}

// BenchmarkTraceOfAMessageIn10kSegments records traces on a partition of
// 10,000 segments: on a message of the group's current batch, and on one
// that no batch of the group holds.
func BenchmarkTraceOfAMessageIn10kSegments(b *testing.B) {
	br := start(b)
	br.Call(b, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "q"})
	br.Push(b, map[string]any{"queue": "q", "partition": "p", "payload": 0, "transactionId": "t0"})
	segs := make([][]segment.Frame, 9999)
	now := time.Now()
	for i := range segs {
		segs[i] = spread(1, fmt.Sprint("t", i+1), func(int) time.Time { return now })
	}
	must(b, br.DB.AppendSegments(b.Context(), br.Tenant, "q", "p", segs...))
	// The group's batch is the last ten messages, under a lease.
	must(b, br.DB.PlaceCursor(b.Context(), br.Tenant, "q", "p", "g", 9990))
	if got := br.Pop(b, "/api/v1/pop/queue/q/partition/p?batch=10&consumerGroup=g"); got == nil || len(got.Messages) != 10 {
		b.Fatalf("the group's batch: %+v", got)
	}
	must(b, br.DB.Analyze(b.Context()))
	pid := br.Stored(b, "q").Partitions["p"]
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

// spread makes n one-message frames, created at at(i), all with the
// transaction id tx, as these benchmarks have always arranged them (the
// messages listing reads distinct ids about three times slower).
func spread(n int, tx string, at func(i int) time.Time) []segment.Frame {
	out := make([]segment.Frame, n)
	for i := range out {
		out[i] = segment.Frame{ID: uuid.New(), TransactionID: tx, CreatedAt: at(i).UnixMicro(), Payload: []byte("1")}
	}
	return out
}

// benchGet reads path as a dashboard polls it.
func benchGet(b *testing.B, br *brokertest.Broker, path string) {
	for b.Loop() {
		if r := br.Do(b, "GET", path, "", nil); r.Status != http.StatusOK {
			b.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
	}
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
