package app_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

// PostgreSQL ends every connection when it restarts. The pooled ones look
// idle and healthy to the broker until used, so the pool must drop them
// before handing them to a request: once the server is back, no request
// fails on a connection of the server that is gone.
func TestRequestsAfterAPostgreSQLRestartNeverUseADeadConnection(t *testing.T) {
	pg := pgtest.Own(t)
	b := brokertest.StartOn(t, pg.URL("postgres").String())
	pushN := func(n int, what string) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r := b.Do(t, "POST", "/api/v1/push", "", map[string]any{"items": []map[string]any{
					{"queue": "restart", "partition": fmt.Sprint(i % 4), "payload": map[string]int{"n": i}}}})
				if r.Status != http.StatusCreated {
					t.Errorf("%s push %d = %d %s", what, i, r.Status, r.Body)
				}
			})
		}
		wg.Wait()
	}
	pushN(40, "warm-up") // fills the pool with connections
	for i := range 3 {
		start := time.Now()
		if err := pg.Restart(); err != nil {
			t.Fatal(err)
		}
		t.Logf("restart %d took %v", i+1, time.Since(start).Round(time.Millisecond))
		for j := range 30 {
			if r := b.Do(t, "GET", "/api/v1/pop/queue/restart?batch=1&autoAck=true", "", nil); r.Status >= 500 {
				t.Errorf("restart %d, pop %d = %d %s", i+1, j, r.Status, r.Body)
			}
		}
		pushN(40, fmt.Sprintf("restart %d:", i+1))
	}
}
