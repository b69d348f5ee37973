package queue_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

// wakeLatency parks a pop on consumer, pushes through producer, and returns
// how long after the push answered the pop answered.
func wakeLatency(t *testing.T, consumer, producer *brokertest.Broker, queue string) time.Duration {
	t.Helper()
	type result struct {
		p  *brokertest.Popped
		at time.Time
	}
	done := make(chan result, 1)
	go func() {
		p := consumer.Pop(t, "/api/v1/pop/queue/"+queue+"?wait=true&timeout=10000&autoAck=true")
		done <- result{p, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond) // let it park
	producer.Push(t, brokertest.Numbered(queue, "Default", 0, 1)...)
	pushed := time.Now()
	r := <-done
	require.NotNil(t, r.p)
	return r.at.Sub(pushed)
}

// requireWakesWithin50ms allows a few tries: a scheduler hiccup on a busy
// machine may delay one wake-up, a missing wake-up delays all of them to
// the timeout.
func requireWakesWithin50ms(t *testing.T, consumer, producer *brokertest.Broker) {
	var lat []time.Duration
	for i := 0; i < 3; i++ {
		d := wakeLatency(t, consumer, producer, "lp")
		if d < 50*time.Millisecond {
			return
		}
		lat = append(lat, d)
	}
	t.Fatalf("parked pop woke %v after the push", lat)
}

func TestLongPollWakesWithin50msOfAPush(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	requireWakesWithin50ms(t, b, b)
}

func TestLongPollWakesWithin50msOfAPushOnAnotherReplica(t *testing.T) {
	t.Parallel()
	a := brokertest.Start(t)
	b := brokertest.StartOn(t, a.DatabaseURL)
	requireWakesWithin50ms(t, a, b)
}

func TestLongPollWakesForAQueueCreatedWhileParked(t *testing.T) {
	t.Parallel()
	a := brokertest.Start(t)
	b := brokertest.StartOn(t, a.DatabaseURL)
	d := wakeLatency(t, a, b, "born-later")
	require.Less(t, d, 2*time.Second)
}

func TestLongPollReturns204CloseToTimeout(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	b.Push(t, brokertest.Numbered("q", "Default", 0, 1)...)
	require.NotNil(t, b.Pop(t, "/api/v1/pop/queue/q")) // leased from now on
	start := time.Now()
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/q?wait=true&timeout=300"))
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 300*time.Millisecond)
	require.Less(t, took, 2*time.Second)
}

func TestLongPollWhoseClientLeftClaimsNothing(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": "q"})
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, "GET", b.URL+"/api/v1/pop/queue/q?wait=true&timeout=10000", nil)
	require.NoError(t, err)
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-gone
	time.Sleep(50 * time.Millisecond) // the server sees the connection close
	b.Push(t, brokertest.Numbered("q", "Default", 0, 1)...)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, 0, b.Count(t, `SELECT count(*) FROM queen.cursors WHERE lease_id IS NOT NULL`))
	require.Equal(t, []int{0}, b.Pop(t, "/api/v1/pop/queue/q").Ns())
}
