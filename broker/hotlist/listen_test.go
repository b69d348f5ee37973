package hotlist_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/hotlist"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

// A replica learns of another replica's pushes only through its LISTEN
// connection (or the reseed, which these brokers do hourly), so however
// often PostgreSQL restarts, each LISTEN is back within moments of the
// server, and a pop parked on one replica wakes at a push on the other.
func TestTheListenerIsBackPromptlyAfterEveryPostgreSQLRestart(t *testing.T) {
	pg := pgtest.Own(t)
	url := pg.URL("postgres").String()
	noReseed := func(c *config.Config) { c.ReseedInterval = time.Hour }
	a := brokertest.StartOn(t, url, noReseed)
	b := brokertest.StartOn(t, url, noReseed)
	push(t, a) // creates the queue
	pop(t, b, "/api/v1/pop/queue/lp?autoAck=true")
	for i := range 6 {
		if err := pg.Restart(); err != nil {
			t.Fatal(err)
		}
		up := time.Now()
		waitForListeners(t, pg, 2, 2*time.Second)
		t.Logf("restart %d: both LISTENs back %v after PostgreSQL", i+1, time.Since(up).Round(time.Millisecond))
		if d := wakeLatency(t, b, a); d > 500*time.Millisecond {
			t.Fatalf("restart %d: a pop parked on one replica woke %v after a push on the other", i+1, d)
		}
	}
}

// waitForListeners waits until n connections hold a LISTEN on the log's channel.
func waitForListeners(t *testing.T, pg *pgtest.Cluster, n int, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var got int
	for ctx.Err() == nil {
		if conn, err := pgx.Connect(ctx, pg.URL("postgres").String()); err == nil {
			err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = $1",
				`LISTEN "`+hotlist.Channel+`"`).Scan(&got)
			conn.Close(ctx)
			if err == nil && got >= n {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d of %d LISTEN connections were back %v after PostgreSQL", got, n, within)
}

func push(t *testing.T, b *brokertest.Broker) {
	t.Helper()
	r := b.Do(t, "POST", "/api/v1/push", "", map[string]any{
		"items": []map[string]any{{"queue": "lp", "payload": map[string]int{"n": 1}}}})
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("push = %d %s", r.Status, r.Body)
	}
}

func pop(t *testing.T, b *brokertest.Broker, path string) brokertest.Response {
	t.Helper()
	r := b.Do(t, "GET", path, "", nil)
	if r.Status != http.StatusOK && r.Status != http.StatusNoContent {
		t.Errorf("pop = %d %s", r.Status, r.Body)
	}
	return r
}

// wakeLatency parks a pop on consumer, pushes through producer, and returns
// how long after the push answered the pop answered with the message.
func wakeLatency(t *testing.T, consumer, producer *brokertest.Broker) time.Duration {
	t.Helper()
	done := make(chan time.Time, 1)
	go func() {
		r := pop(t, consumer, "/api/v1/pop/queue/lp?wait=true&timeout=10000&autoAck=true")
		if r.Status != http.StatusOK {
			t.Errorf("parked pop = %d, want the message", r.Status)
		}
		done <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond) // let it park
	push(t, producer)
	pushed := time.Now()
	return (<-done).Sub(pushed)
}
