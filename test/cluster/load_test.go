package cluster_test

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
	"github.com/regent-mq/regent/test/cluster"
)

// client bounds every request: a request that hangs through a fault is a
// failure of its own ("hung").
var client = &http.Client{Timeout: 20 * time.Second}

// pushLoad pushes one message at a time through each broker, every one
// with a payload number of its own, and records which were acknowledged.
type pushLoad struct {
	queue string
	next  atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	acked    map[int64]bool
	statuses map[string]int
	since    []int           // 201s per broker since the last mark
	faulty   []time.Duration // latencies while faulty is set
	faults   bool
}

func startPushLoad(bs []*cluster.Broker, queue string) *pushLoad {
	l := &pushLoad{queue: queue, stop: make(chan struct{}), acked: map[int64]bool{}, statuses: map[string]int{}, since: make([]int, len(bs))}
	for i, b := range bs {
		l.wg.Go(func() { l.run(i, b) })
	}
	return l
}

func (l *pushLoad) run(i int, b *cluster.Broker) {
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		n := l.next.Add(1)
		body, _ := json.Marshal(map[string]any{"items": []map[string]any{
			{"queue": l.queue, "partition": fmt.Sprintf("p%d", i), "payload": map[string]int64{"n": n}}}})
		start := time.Now()
		status := "error"
		resp, err := client.Post(b.URL+"/api/v1/push", "application/json", bytes.NewReader(body))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = fmt.Sprint(resp.StatusCode)
		} else if err, ok := err.(interface{ Timeout() bool }); ok && err.Timeout() {
			status = "hung"
		}
		l.mu.Lock()
		l.statuses[status]++
		if status == "201" {
			l.acked[n] = true
			l.since[i]++
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

// mark starts counting the acknowledged pushes afresh, and says whether
// the latencies from now on are those of a fault.
func (l *pushLoad) mark(faults bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.since)
	l.faults = faults
}

// flowing reports whether every broker had n pushes acknowledged since the
// last mark.
func (l *pushLoad) flowing(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Min(l.since) >= n
}

// waitFlowing waits up to within for flowing(n).
func (l *pushLoad) waitFlowing(n int, within time.Duration) bool {
	for deadline := time.Now().Add(within); !l.flowing(n); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

func (l *pushLoad) halt() {
	close(l.stop)
	l.wg.Wait()
}

// p99 is the 99th percentile latency of the pushes made during faults.
func (l *pushLoad) p99() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.faulty) == 0 {
		return 0
	}
	s := slices.Clone(l.faulty)
	slices.Sort(s)
	return s[len(s)*99/100]
}

// verify pops the whole queue through b and fails the test when an
// acknowledged push is missing or a push is stored twice. It also fails
// on an answer other than 201 or 503: a database fault is never the
// client's, nor the broker's (a 500).
func (l *pushLoad) verify(t *testing.T, b *brokertest.Broker) (acked, lost, dup int) {
	t.Helper()
	for s, n := range l.statuses {
		if s != "201" && s != "503" {
			t.Errorf("%d pushes answered %s, want 201 or 503", n, s)
		}
	}
	seen := popEverything(t, b, l.queue)
	lost, dup = lostAndDuplicated(l.acked, seen)
	if lost > 0 || dup > 0 {
		t.Errorf("%d acknowledged pushes lost, %d stored twice", lost, dup)
	}
	return len(l.acked), lost, dup
}

// popEverything pops queue to the end through b with autoAck and counts
// each payload number {"n": …} delivered.
func popEverything(t *testing.T, b *brokertest.Broker, queue string) map[int64]int {
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

// lostAndDuplicated counts the acknowledged numbers never delivered, and
// the numbers delivered more than once.
func lostAndDuplicated(acked map[int64]bool, seen map[int64]int) (lost, dup int) {
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
