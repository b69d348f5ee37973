package cluster_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

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
// a message deliverable there through another replica) when it has parked,
// and returns how long after act's answer the pop answered.
func parkedWake(t *testing.T, consumer *brokertest.Broker, queue string, act func()) time.Duration {
	t.Helper()
	done := make(chan time.Time, 1)
	go func() {
		r := consumer.Do(t, "GET", "/api/v1/pop/queue/"+queue+"?wait=true&timeout=10000&autoAck=true", "", nil)
		if r.Status != http.StatusOK {
			t.Errorf("parked pop on %s = %d %s", queue, r.Status, r.Body)
		}
		done <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond) // let it park
	act()
	acted := time.Now()
	return (<-done).Sub(acted)
}

// requireWithin50ms allows five tries: a scheduler hiccup on a busy
// machine (make test runs packages side by side on two cores) may delay a
// wake-up, a missing wake-up delays all of them to the timeout.
func requireWithin50ms(t *testing.T, what string, try func() time.Duration) {
	t.Helper()
	var lat []time.Duration
	for range 5 {
		d := try()
		if d < 50*time.Millisecond {
			return
		}
		lat = append(lat, d)
	}
	t.Errorf("%s: the parked pop woke %v after", what, lat)
}

func TestAPopParkedOnOneReplicaWakesWithin50msOfAPushOnAnother(t *testing.T) {
	t.Parallel()
	bs := cluster.Start(t, pgtest.URL(t), 3, noReseed)
	push(t, brokertest.At(bs[0].URL), "lp", 0) // creates the queue
	brokertest.At(bs[0].URL).Do(t, "GET", "/api/v1/pop/queue/lp?autoAck=true", "", nil)
	for i, c := range bs {
		for j, p := range bs {
			if i == j {
				continue
			}
			consumer, producer := brokertest.At(c.URL), brokertest.At(p.URL)
			requireWithin50ms(t, fmt.Sprintf("push on replica %d, pop on replica %d", j, i), func() time.Duration {
				return parkedWake(t, consumer, "lp", func() { push(t, producer, "lp", 1) })
			})
		}
	}
}

func TestAPopParkedOnOneReplicaWakesWithin50msOfASinkEmitOnAnother(t *testing.T) {
	t.Parallel()
	bs := cluster.Start(t, pgtest.URL(t), 3, noReseed)
	source, consumer, committer := brokertest.At(bs[0].URL), brokertest.At(bs[1].URL), brokertest.At(bs[2].URL)
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
	requireWithin50ms(t, "sink emit on replica 2, pop on replica 1", func() time.Duration {
		push(t, source, "src", 1)
		r := source.Do(t, "GET", "/api/v1/pop/queue/src?consumerGroup=streams.wake", "", nil)
		var popped struct {
			PartitionID string `json:"partitionId"`
			LeaseID     string `json:"leaseId"`
		}
		if r.Status != http.StatusOK {
			t.Fatalf("pop source = %d %s", r.Status, r.Body)
		}
		r.JSON(t, &popped)
		return parkedWake(t, consumer, "sink", func() {
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
