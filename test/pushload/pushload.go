// Package pushload pushes numbered messages at brokers while a test breaks
// something (a database failover, a network fault, a pod deleted, a rolling
// upgrade), records which pushes were acknowledged, and afterwards checks
// that every acknowledged push is stored, and none twice.
package pushload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
)

// Client bounds every request: a request that hangs through a fault is a
// failure of its own ("hung").
var Client = &http.Client{Timeout: 20 * time.Second}

// Load pushes one message at a time through each of its URLs, every one
// with a payload number of its own.
type Load struct {
	queue string
	token string
	next  atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	Acked    map[int64]bool
	Statuses map[string]int  // answers by status code, "error" or "hung"
	Since    []int           // 201s per URL since the last Mark
	Failures []string        // the first few answers other than 201
	faulty   []time.Duration // latencies while faults is set
	faults   bool
}

// Start starts one pushing client per URL (a URL may be given more than
// once), with token as bearer when it is not empty.
func Start(urls []string, queue, token string) *Load {
	l := &Load{queue: queue, token: token, stop: make(chan struct{}), Acked: map[int64]bool{}, Statuses: map[string]int{}, Since: make([]int, len(urls))}
	for i, u := range urls {
		l.wg.Go(func() { l.run(i, u) })
	}
	return l
}

func (l *Load) run(i int, url string) {
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		n := l.next.Add(1)
		// A transactionId on every message, as Queen's clients send, makes
		// the push idempotent: the Idempotency-Key lets net/http send it
		// again on a new connection when the one it reused was closed under
		// it (a broker pod stopping), and the broker stores it once.
		txid := fmt.Sprintf("pushload-%d", n)
		body, _ := json.Marshal(map[string]any{"items": []map[string]any{
			{"queue": l.queue, "partition": fmt.Sprintf("p%d", i), "payload": map[string]int64{"n": n}, "transactionId": txid}}})
		req, _ := http.NewRequest(http.MethodPost, url+"/api/v1/push", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", txid)
		if l.token != "" {
			req.Header.Set("Authorization", "Bearer "+l.token)
		}
		start := time.Now()
		status := "error"
		resp, err := Client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = fmt.Sprint(resp.StatusCode)
		} else if err, ok := err.(interface{ Timeout() bool }); ok && err.Timeout() {
			status = "hung"
		}
		l.mu.Lock()
		l.Statuses[status]++
		if status == "201" {
			l.Acked[n] = true
			l.Since[i]++
		} else if len(l.Failures) < 10 {
			l.Failures = append(l.Failures, fmt.Sprintf("push %d through %s: %s %v", n, url, status, err))
		}
		if l.faults {
			l.faulty = append(l.faulty, time.Since(start))
		}
		l.mu.Unlock()
		if status != "201" {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Mark starts counting the acknowledged pushes afresh, and says whether
// the latencies from now on are those of a fault.
func (l *Load) Mark(faults bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.Since)
	l.faults = faults
}

// Flowing reports whether every URL had n pushes acknowledged since the
// last Mark.
func (l *Load) Flowing(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Min(l.Since) >= n
}

// WaitFlowing waits up to within for Flowing(n).
func (l *Load) WaitFlowing(n int, within time.Duration) bool {
	for deadline := time.Now().Add(within); !l.Flowing(n); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// Halt stops the clients and waits for their last requests.
func (l *Load) Halt() {
	close(l.stop)
	l.wg.Wait()
}

// P99 is the 99th percentile latency of the pushes made during faults.
func (l *Load) P99() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.faulty) == 0 {
		return 0
	}
	s := slices.Clone(l.faulty)
	slices.Sort(s)
	return s[len(s)*99/100]
}

// Verify pops the whole queue through b and fails the test when an
// acknowledged push is missing or a push is stored twice. It also fails
// on an answer other than 201 or 503: a database fault is never the
// client's, nor the broker's (a 500).
func (l *Load) Verify(t *testing.T, b *brokertest.Broker) (acked, lost, dup int) {
	t.Helper()
	for s, n := range l.Statuses {
		if s != "201" && s != "503" {
			t.Errorf("%d pushes answered %s, want 201 or 503", n, s)
		}
	}
	seen := PopEverything(t, b, l.queue)
	lost, dup = LostAndDuplicated(l.Acked, seen)
	if lost > 0 || dup > 0 {
		t.Errorf("%d acknowledged pushes lost, %d stored twice", lost, dup)
	}
	return len(l.Acked), lost, dup
}

// PopEverything pops queue to the end through b with autoAck and counts
// each payload number {"n": …} delivered.
func PopEverything(t *testing.T, b *brokertest.Broker, queue string) map[int64]int {
	t.Helper()
	seen := map[int64]int{}
	for range 1000 {
		r := b.Do(t, "GET", "/api/v1/pop/queue/"+queue+"?batch=1000&partitions=100&autoAck=true", "", nil)
		if r.Status == http.StatusNoContent {
			return seen
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
	t.Fatal("the queue never ran empty")
	return nil
}

// LostAndDuplicated counts the acknowledged numbers never delivered, and
// the numbers delivered more than once.
func LostAndDuplicated(acked map[int64]bool, seen map[int64]int) (lost, dup int) {
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
	return lost, dup
}
