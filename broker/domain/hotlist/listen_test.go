package hotlist_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

// A replica learns of another replica's pushes only through its LISTEN
// connection (or the reseed, which these brokers do hourly), so however
// often PostgreSQL restarts, each LISTEN comes back, and a pop parked on
// one replica wakes at a push on the other. A LISTEN that is not back
// loses the push's announcement: the parked pop then answers 204 at its
// 30 s timeout, and the test fails on that, not on a clock.
func TestTheListenerIsBackAfterEveryPostgreSQLRestart(t *testing.T) {
	pg := pgtest.Own(t)
	url := pg.URL("postgres").String()
	noReseed := func(c *config.Config) { c.ReseedInterval = time.Hour }
	a := brokertest.StartOn(t, url, noReseed)
	b := brokertest.StartOn(t, url, noReseed)
	a.PushN(t, "lp", "", 0, 1) // creates the queue
	b.Pop(t, "/api/v1/pop/queue/lp?autoAck=true")
	for i := range 6 {
		if err := pg.Restart(); err != nil {
			t.Fatal(err)
		}
		up := time.Now()
		waitForListeners(t, pg, 2)
		t.Logf("restart %d: both LISTENs back %v after PostgreSQL", i+1, time.Since(up).Round(time.Millisecond))
		wakes(t, b, a, i+1)
	}
}

// waitForListeners waits until n connections hold a LISTEN on the log's
// channel, for at most 30 s.
func waitForListeners(t *testing.T, pg *pgtest.Cluster, n int) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), pg.URL("postgres").String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	brokertest.Eventually(t, 30*time.Second, func() error {
		got, err := dbtest.New(pool).Listeners(t.Context(), hotlist.Channel)
		if err != nil {
			return err
		}
		if got < n {
			return fmt.Errorf("%d of %d LISTEN connections are back after PostgreSQL", got, n)
		}
		return nil
	})
}

// wakes parks a pop on consumer, pushes message n through producer, and
// requires the parked pop to deliver it.
func wakes(t *testing.T, consumer, producer *brokertest.Broker, n int) {
	t.Helper()
	got := make(chan brokertest.Response, 1)
	go func() {
		r, err := consumer.Send("GET", "/api/v1/pop/queue/lp?wait=true&timeout=30000&autoAck=true", "", nil)
		if err != nil {
			r = brokertest.Response{Body: []byte(err.Error())}
		}
		got <- r
	}()
	consumer.WaitParked(t, 1)
	producer.PushN(t, "lp", "", n, 1)
	if r := <-got; r.Status != http.StatusOK {
		t.Fatalf("the pop parked on one replica was not woken by the push on the other: %d %s", r.Status, r.Body)
	}
}
