package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/cluster"
	"github.com/regent-mq/regent/test/pgtest"
)

// retrying sends a request to the first broker of urls, and on a
// connection closed or refused under it sends it again to the next one, as
// Queen's clients do behind a Service whose endpoints move on. An answer,
// whatever its status, is final; so is a timeout.
func retrying(client *http.Client, urls []string, method, path string, body []byte) (status int, from int, err error) {
	for attempt := range 2 * len(urls) {
		i := attempt % len(urls)
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, _ := http.NewRequest(method, urls[i]+path, rd)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, i, err
		}
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, i, nil
	}
	return 0, 0, fmt.Errorf("%s %s: no broker answered", method, path)
}

// A broker told to stop (SIGTERM) under push and long-poll load fails no
// request of a client that retries on a closed connection: it serves on
// through its drain grace, answers its parked pops, finishes what is in
// flight and exits, and the clients' next attempts reach the other replica.
// Every push answered 201 is stored.
func TestABrokerStoppedUnderLoadFailsNoRequestOfAClientThatRetriesOnAClosedConnection(t *testing.T) {
	dbURL := pgtest.URL(t)
	bs := cluster.Start(t, dbURL, 2, "--drain-grace=1s", "--shutdown-grace=10s")
	urls := []string{bs[0].URL, bs[1].URL}
	client := &http.Client{Timeout: 20 * time.Second}

	var (
		stop              = make(chan struct{})
		wg                sync.WaitGroup
		next, acked       atomic.Int64
		sigterm           atomic.Int64 // unix nanoseconds
		servedDuringGrace atomic.Int64
		mu                sync.Mutex
		failures          []string
	)
	fail := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, s)
	}
	work := func(send func() (int, int, error), ok func(int) bool) {
		for i := 0; i < 100000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			sent := time.Now().UnixNano()
			status, from, err := send()
			switch {
			case err != nil:
				fail(err.Error())
			case !ok(status):
				fail(fmt.Sprintf("status %d", status))
			// Sent well after SIGTERM, and answered by the stopping broker.
			case from == 0 && sigterm.Load() != 0 && sent > sigterm.Load()+int64(200*time.Millisecond):
				servedDuringGrace.Add(1)
			}
		}
	}
	for range 4 {
		wg.Go(func() {
			work(func() (int, int, error) {
				n := next.Add(1)
				body, _ := json.Marshal(map[string]any{"items": []map[string]any{{"queue": "drain", "partition": fmt.Sprintf("p%d", n%4),
					"payload": map[string]int64{"n": n}, "transactionId": fmt.Sprintf("drain-%d", n)}}})
				status, from, err := retrying(client, urls, "POST", "/api/v1/push", body)
				if status == http.StatusCreated {
					acked.Add(1)
				}
				return status, from, err
			}, func(s int) bool { return s == http.StatusCreated })
		})
	}
	for range 2 {
		wg.Go(func() {
			work(func() (int, int, error) {
				return retrying(client, urls, "GET", "/api/v1/pop/queue/drain?wait=true&timeout=2000&batch=10&autoAck=true", nil)
			}, func(s int) bool { return s == http.StatusOK || s == http.StatusNoContent })
		})
	}

	// Under load: pushes are being acknowledged.
	atLeast := func(n int64) {
		t.Helper()
		brokertest.Eventually(t, 30*time.Second, func() error {
			if got := acked.Load(); got < n {
				return fmt.Errorf("%d pushes acknowledged, want %d", got, n)
			}
			return nil
		})
	}
	atLeast(100)
	sigterm.Store(time.Now().UnixNano())
	if err := bs[0].Terminate(30 * time.Second); err != nil {
		t.Error(err)
	}
	atLeast(acked.Load() + 100) // the load carries on at the other replica
	close(stop)
	wg.Wait()

	if len(failures) > 0 {
		t.Errorf("%d requests failed, first: %v", len(failures), failures[:min(5, len(failures))])
	}
	if servedDuringGrace.Load() == 0 {
		t.Error("the stopping broker served no request sent during its drain grace")
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	drained, err := dbtest.New(pool).Queue(context.Background(), "default", "drain")
	if err != nil {
		t.Fatal(err)
	}
	if stored := int64(drained.Frames); stored != acked.Load() {
		t.Errorf("%d pushes answered 201, %d stored", acked.Load(), stored)
	}
	t.Logf("%d pushes acknowledged; the stopping broker served %d requests sent during its drain grace", acked.Load(), servedDuringGrace.Load())
}
