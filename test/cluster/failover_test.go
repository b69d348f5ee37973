package cluster_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/cluster"
	"github.com/regent-mq/regent/test/pgtest"
)

// client bounds every request: a request that hangs through a failover is
// a failure of its own.
var client = &http.Client{Timeout: 20 * time.Second}

// TestAFailOverLosesNoAcknowledgedPush pushes through three brokers on a
// primary with a synchronous standby, crashes the primary (immediate
// shutdown) and promotes the standby. The brokers use a multi-host URL with
// target_session_attrs=read-write, so they reconnect to the new primary
// without a restart. Every push answered 201 must be there afterwards, once.
func TestAFailOverLosesNoAcknowledgedPush(t *testing.T) {
	t.Parallel()
	pair := pgtest.StartPair(t)
	bs := cluster.Start(t, pair.URL("postgres"), 3)

	var (
		next      atomic.Int64
		failedAt  atomic.Int64 // unix nanos of the failover, 0 before it
		mu        sync.Mutex
		acked     = map[int64]bool{}
		statuses  = map[string]int{}
		afterward = make([]int, len(bs)) // 201s after the failover, per broker
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := next.Add(1)
				body, _ := json.Marshal(map[string]any{"items": []map[string]any{
					{"queue": "fo", "partition": fmt.Sprintf("p%d", i), "payload": map[string]int64{"n": n}}}})
				status := "error"
				resp, err := client.Post(b.URL+"/api/v1/push", "application/json", bytes.NewReader(body))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = fmt.Sprint(resp.StatusCode)
				} else if err, ok := err.(interface{ Timeout() bool }); ok && err.Timeout() {
					status = "hung"
				}
				mu.Lock()
				statuses[status]++
				if status == "201" {
					acked[n] = true
					if failedAt.Load() != 0 {
						afterward[i]++
					}
				}
				mu.Unlock()
				if status != "201" {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	var sawDown, sawUp atomic.Bool
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			resp, err := client.Get(bs[0].URL + "/health")
			if err != nil {
				continue
			}
			resp.Body.Close()
			if failedAt.Load() == 0 {
				continue
			}
			if resp.StatusCode == http.StatusServiceUnavailable {
				sawDown.Store(true)
			} else if resp.StatusCode == http.StatusOK && sawDown.Load() {
				sawUp.Store(true)
			}
		}
	})

	time.Sleep(time.Second)
	failedAt.Store(time.Now().UnixNano())
	if err := pair.FailOver(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	promoted := time.Now()
	recovered := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range afterward {
			if n < 20 {
				return false
			}
		}
		return sawUp.Load()
	}
	for deadline := time.Now().Add(60 * time.Second); !recovered() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("failover: promoted %v after the crash; answers %v; health down %v, up again %v",
		promoted.Sub(time.Unix(0, failedAt.Load())).Round(time.Millisecond), statuses, sawDown.Load(), sawUp.Load())
	if !recovered() {
		t.Fatalf("the brokers did not recover within 60s of the promotion without a restart: 201s after it per broker %v", afterward)
	}
	if !sawDown.Load() {
		t.Error("/health never reported the outage")
	}
	for s, n := range statuses {
		if s != "201" && (s < "500" || s > "599") {
			t.Errorf("%d pushes answered %s during the failover, want 201 or a 5xx", n, s)
		}
	}

	seen := map[int64]int{}
	b := brokertest.At(bs[0].URL)
	for range 1000 {
		r := b.Do(t, "GET", "/api/v1/pop/queue/fo?batch=1000&partitions=3&autoAck=true", "", nil)
		if r.Status == http.StatusNoContent {
			break
		}
		var page struct {
			Messages []struct {
				Data struct{ N int64 } `json:"data"`
			} `json:"messages"`
		}
		if r.Status != http.StatusOK {
			t.Fatalf("pop = %d %s", r.Status, r.Body)
		}
		r.JSON(t, &page)
		for _, m := range page.Messages {
			seen[m.Data.N]++
		}
	}
	var lost, dup int
	for n := range acked {
		if seen[n] == 0 {
			lost++
		}
	}
	for _, c := range seen {
		if c > 1 {
			dup++
		}
	}
	t.Logf("figures: %d pushes acknowledged, %d stored, %d lost, %d duplicated", len(acked), len(seen), lost, dup)
	if lost > 0 || dup > 0 {
		t.Fatalf("%d acknowledged pushes lost, %d stored twice", lost, dup)
	}
}
