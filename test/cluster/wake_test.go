package cluster_test

import (
	"net/http"
	"testing"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/cluster"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { cluster.Main(m) }

// noReseed leaves the LISTEN connection as a replica's only news of the
// others' pushes: an hourly reseed cannot hide a missing wake-up.
const noReseed = "--reseed-interval=1h"

func push(t *testing.T, b *brokertest.Broker, queue string, payload any) {
	t.Helper()
	r := b.Do(t, "POST", "/api/v1/push", "", map[string]any{"items": []map[string]any{{"queue": queue, "payload": payload}}})
	if r.Status != http.StatusCreated {
		t.Fatalf("push to %s = %d %s", queue, r.Status, r.Body)
	}
}

// parkedWake parks a long-poll on queue at consumer, runs act (which makes
// a message deliverable there through another replica) once it has
// parked, and requires the pop to deliver. The brokers never reseed and
// the pop waits 30 s, so only the announcement can wake it: a lost one is
// a 204 at the timeout, and the test fails on that, not on a clock.
func parkedWake(t *testing.T, consumer *brokertest.Broker, queue string, act func()) {
	t.Helper()
	got := make(chan brokertest.Response, 1)
	go func() {
		r, err := consumer.Send("GET", "/api/v1/pop/queue/"+queue+"?wait=true&timeout=30000&autoAck=true", "", nil)
		if err != nil {
			r = brokertest.Response{Body: []byte(err.Error())}
		}
		got <- r
	}()
	consumer.WaitParked(t, 1)
	act()
	if r := <-got; r.Status != http.StatusOK {
		t.Fatalf("the parked pop on %s was not woken: %d %s", queue, r.Status, r.Body)
	}
}

func TestAPopParkedOnOneReplicaWakesAtAPushOnAnother(t *testing.T) {
	t.Parallel()
	bs := cluster.Start(t, pgtest.URL(t), 3, noReseed)
	push(t, brokertest.At(bs[0].URL), "lp", 0) // creates the queue
	brokertest.At(bs[0].URL).Do(t, "GET", "/api/v1/pop/queue/lp?autoAck=true", "", nil)
	for i, c := range bs {
		for j, p := range bs {
			if i == j {
				continue
			}
			consumer, producer := c.Client(), brokertest.At(p.URL)
			t.Logf("push on replica %d, pop on replica %d", j, i)
			parkedWake(t, consumer, "lp", func() { push(t, producer, "lp", 1) })
		}
	}
}

func TestAPopParkedOnOneReplicaWakesAtASinkEmitOnAnother(t *testing.T) {
	t.Parallel()
	bs := cluster.Start(t, pgtest.URL(t), 3, noReseed)
	source, consumer, committer := brokertest.At(bs[0].URL), bs[1].Client(), brokertest.At(bs[2].URL)
	r := source.Do(t, "POST", "/streams/v1/queries", "", map[string]any{
		"name": "wake", "source_queue": "src", "sink_queue": "sink", "config_hash": "v1"})
	if r.Status != http.StatusOK && r.Status != http.StatusCreated {
		t.Fatalf("register = %d %s", r.Status, r.Body)
	}
	var q struct {
		QueryID string `json:"query_id"`
	}
	r.JSON(t, &q)
	push(t, source, "sink", 0) // creates the sink queue
	source.Do(t, "GET", "/api/v1/pop/queue/sink?autoAck=true", "", nil)
	push(t, source, "src", 1)
	r = source.Do(t, "GET", "/api/v1/pop/queue/src?consumerGroup=streams.wake", "", nil)
	var popped struct {
		PartitionID string `json:"partitionId"`
		LeaseID     string `json:"leaseId"`
	}
	if r.Status != http.StatusOK {
		t.Fatalf("pop source = %d %s", r.Status, r.Body)
	}
	r.JSON(t, &popped)
	parkedWake(t, consumer, "sink", func() {
		r := committer.Do(t, "POST", "/streams/v1/cycle", "", map[string]any{
			"query_id": q.QueryID, "partition_id": popped.PartitionID, "consumer_group": "streams.wake",
			"push_items": []map[string]any{{"queue": "sink", "payload": map[string]int{"n": 1}}},
			"ack":        map[string]any{"leaseId": popped.LeaseID, "status": "completed", "count": 1},
		})
		var c struct {
			Success bool `json:"success"`
		}
		if r.Status != http.StatusOK {
			t.Fatalf("cycle = %d %s", r.Status, r.Body)
		}
		if r.JSON(t, &c); !c.Success {
			t.Fatalf("cycle did not commit: %s", r.Body)
		}
	})
}

// urls are the brokers' base URLs, one push client each.
func urls(bs []*cluster.Broker) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.URL
	}
	return out
}
