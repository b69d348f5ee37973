package cluster_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/cluster"
	"github.com/regent-mq/regent/test/pgtest"
	"github.com/regent-mq/regent/test/pushload"
)

func setMaintenance(t *testing.T, b *cluster.Broker, on bool) {
	t.Helper()
	if r := brokertest.At(b.URL).Do(t, "POST", "/api/v1/system/maintenance", "", map[string]any{"enabled": on}); r.Status != http.StatusOK {
		t.Fatalf("maintenance %v: %d %s", on, r.Status, r.Body)
	}
}

func buffered(t *testing.T, b *cluster.Broker) int {
	t.Helper()
	n, err := bufferedOf(b)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// bufferedOf is what b's spool holds, or why b cannot say: a broker just
// started again may not answer yet.
func bufferedOf(b *cluster.Broker) (int, error) {
	r, err := brokertest.At(b.URL).Send("GET", "/api/v1/system/maintenance", "", nil)
	if err != nil {
		return 0, err
	}
	var s struct{ BufferedMessages int }
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &s) != nil {
		return 0, fmt.Errorf("maintenance status: %d %s", r.Status, r.Body)
	}
	return s.BufferedMessages, nil
}

// waitDrained waits, for up to 30 s, until every broker's spool is empty.
func waitDrained(t *testing.T, bs ...*cluster.Broker) {
	t.Helper()
	brokertest.Eventually(t, 30*time.Second, func() error {
		if left, err := spooled(bs...); err != nil || left > 0 {
			return fmt.Errorf("the spools still hold %d messages (%v)", left, err)
		}
		return nil
	})
}

// spooled is what the brokers' spools hold together.
func spooled(bs ...*cluster.Broker) (int, error) {
	n := 0
	for _, b := range bs {
		m, err := bufferedOf(b)
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, nil
}

// waitAcked waits until n more pushes than now are answered 201.
func (l *spoolLoad) waitAcked(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	want := len(l.acked) + n
	l.mu.Unlock()
	brokertest.Eventually(t, 30*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.acked) < want {
			return fmt.Errorf("%d pushes answered 201, want %d", len(l.acked), want)
		}
		return nil
	})
}

// spoolLoad is clients pushing throughout, each request to the next
// broker in turn: one to three items, every other one with a transactionId,
// and now and then the items with one sent again, as a client retries.
type spoolLoad struct {
	queue string
	stop  chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	next     int64
	acked    map[int64]bool // payload numbers of pushes answered 201
	statuses map[string]int
	items    map[string]int // answered item statuses: queued, buffered, duplicate
}

func startSpoolLoad(bs []*cluster.Broker, queue string, clients int) *spoolLoad {
	l := &spoolLoad{queue: queue, stop: make(chan struct{}), acked: map[int64]bool{}, statuses: map[string]int{}, items: map[string]int{}}
	for c := range clients {
		l.wg.Go(func() { l.run(bs, c) })
	}
	return l
}

func (l *spoolLoad) run(bs []*cluster.Broker, c int) {
	for k := 0; ; k++ {
		select {
		case <-l.stop:
			return
		default:
		}
		l.mu.Lock()
		var items []map[string]any
		var ns []int64
		for range 1 + k%3 {
			l.next++
			n := l.next
			item := map[string]any{"queue": l.queue, "partition": fmt.Sprintf("p%d", c), "payload": map[string]int64{"n": n}}
			if n%2 == 0 {
				item["transactionId"] = fmt.Sprintf("tx-%d", n)
			}
			items = append(items, item)
			ns = append(ns, n)
		}
		l.mu.Unlock()
		l.send(bs[(c+k)%len(bs)], items, ns)
		if k%7 == 0 {
			// A client's retry, through another broker, of the items that
			// have a transactionId: they must not be stored twice.
			var again []map[string]any
			var ans []int64
			for i, n := range ns {
				if n%2 == 0 {
					again, ans = append(again, items[i]), append(ans, n)
				}
			}
			l.send(bs[(c+k+1)%len(bs)], again, ans)
		}
	}
}

func (l *spoolLoad) send(b *cluster.Broker, items []map[string]any, ns []int64) {
	if len(items) == 0 {
		return
	}
	body, _ := json.Marshal(map[string]any{"items": items})
	status := "error"
	var answer []struct{ Status string }
	resp, err := pushload.Client.Post(b.URL+"/api/v1/push", "application/json", bytes.NewReader(body))
	if err == nil {
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status = fmt.Sprint(resp.StatusCode)
		_ = json.Unmarshal(out, &answer)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statuses[status]++
	if status == "201" {
		for i, a := range answer {
			l.items[a.Status]++
			l.acked[ns[i]] = true
		}
	}
	if status != "201" {
		// A client's pause before it tries again, not a wait for an
		// event: without it the load spins on the shared machine.
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *spoolLoad) halt() {
	close(l.stop)
	l.wg.Wait()
}

// TestPushMaintenanceAcrossThreeBrokersDeliversEveryMessageExactlyOnce
// pushes through three brokers throughout while push maintenance goes on
// and off three times, and kills one broker while it holds a spool: each
// push answered 201 is delivered once, and nothing twice.
func TestPushMaintenanceAcrossThreeBrokersDeliversEveryMessageExactlyOnce(t *testing.T) {
	t.Parallel()
	bs := cluster.Start(t, pgtest.URL(t), 3)
	load := startSpoolLoad(bs, "spooled", 6)
	maxBuffered := 0
	for cycle := range 3 {
		load.waitAcked(t, 50) // pushes flow before the mode goes on
		setMaintenance(t, bs[cycle], true)
		// The spools fill, and pushes answered 201 go on meanwhile.
		brokertest.Eventually(t, 30*time.Second, func() error {
			if n, err := spooled(bs...); err != nil || n < 20 {
				return fmt.Errorf("the spools hold %d messages, want 20 (%v)", n, err)
			}
			return nil
		})
		load.waitAcked(t, 50)
		n := 0
		for _, b := range bs {
			n += buffered(t, b)
		}
		maxBuffered = max(maxBuffered, n)
		if cycle == 1 {
			// Killed with a spool, started again: the spool drains once
			// the mode is off.
			bs[2].Kill()
			bs[2].Start()
		}
		setMaintenance(t, bs[(cycle+1)%3], false)
	}
	load.waitAcked(t, 50) // and after the last mode went off
	load.halt()
	waitDrained(t, bs...)

	lost, dup := pushload.LostAndDuplicated(load.acked, pushload.PopEverything(t, brokertest.At(bs[0].URL), "spooled"))
	t.Logf("figures: %d pushes acknowledged, answers %v, items %v, up to %d spooled at once; %d lost, %d delivered twice",
		len(load.acked), load.statuses, load.items, maxBuffered, lost, dup)
	if lost > 0 || dup > 0 {
		t.Errorf("%d acknowledged pushes lost, %d delivered twice", lost, dup)
	}
	if load.items["buffered"] == 0 || load.items["queued"] == 0 {
		t.Errorf("the load saw items %v, want both buffered and queued ones", load.items)
	}
	for s, n := range load.statuses {
		// A push to the broker while it was killed fails to connect.
		if s != "201" && s != "error" {
			t.Errorf("%d pushes answered %s, want 201", n, s)
		}
	}
}

// A spool outlives its broker, killed or told to stop: SIGTERM seals its
// open file before the process exits, and the next start drains it.
func TestASpoolSurvivesItsBrokerKilledOrStoppedMidMaintenance(t *testing.T) {
	t.Parallel()
	for name, stop := range map[string]func(*cluster.Broker) error{
		"SIGKILL": func(b *cluster.Broker) error { b.Kill(); return nil },
		"SIGTERM": func(b *cluster.Broker) error { return b.Terminate(30 * time.Second) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spoolSurvives(t, stop)
		})
	}
}

func spoolSurvives(t *testing.T, stop func(*cluster.Broker) error) {
	b := cluster.Start(t, pgtest.URL(t), 1)[0]
	setMaintenance(t, b, true)
	items := make([]map[string]any, 20)
	for i := range items {
		items[i] = map[string]any{"queue": "killed", "payload": map[string]int{"n": i}}
	}
	if r := brokertest.At(b.URL).Do(t, "POST", "/api/v1/push", "", map[string]any{"items": items}); r.Status != http.StatusCreated {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	if err := stop(b); err != nil {
		t.Fatal(err)
	}
	b.Start()
	if n := buffered(t, b); n != 20 {
		t.Fatalf("the restarted broker's spool holds %d messages, want 20", n)
	}
	setMaintenance(t, b, false)
	waitDrained(t, b)
	seen := pushload.PopEverything(t, brokertest.At(b.URL), "killed")
	for i := range items {
		if seen[int64(i)] != 1 {
			t.Errorf("message %d delivered %d times, want once", i, seen[int64(i)])
		}
	}
	if len(seen) != len(items) {
		t.Errorf("%d messages delivered, want %d", len(seen), len(items))
	}
}
