package brokertest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Numbered makes n push items for queue/partition whose payloads are
// {"n": from+i}, so that a test can tell which messages came back and in
// what order. An empty partition leaves the item on the queue's Default.
func Numbered(queue, partition string, from, n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"queue": queue, "payload": map[string]any{"n": from + i}}
		if partition != "" {
			out[i]["partition"] = partition
		}
	}
	return out
}

// Push pushes items in one request, requires 201, and returns the answer
// for each item.
func (b *Broker) Push(t testing.TB, items ...map[string]any) []map[string]any {
	t.Helper()
	if items == nil {
		items = []map[string]any{}
	}
	r := b.Call(t, http.StatusCreated, "POST", "/api/v1/push", map[string]any{"items": items})
	var out []map[string]any
	r.JSON(t, &out)
	return out
}

// PushN pushes n numbered messages (see Numbered) in one request.
func (b *Broker) PushN(t testing.TB, queue, partition string, from, n int) {
	t.Helper()
	b.Push(t, Numbered(queue, partition, from, n)...)
}

// Call sends a request with b's token and requires the status.
func (b *Broker) Call(t testing.TB, want int, method, path string, body any) Response {
	t.Helper()
	r := b.Do(t, method, path, "", body)
	if r.Status != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, r.Status, r.Body, want)
	}
	return r
}

// Popped is a pop's 200 answer, as Queen's wire spells it.
type Popped struct {
	Success           bool      `json:"success"`
	Queue             string    `json:"queue"`
	Partition         string    `json:"partition"`
	PartitionID       string    `json:"partitionId"`
	LeaseID           string    `json:"leaseId"`
	ConsumerGroup     string    `json:"consumerGroup"`
	PartitionsClaimed int       `json:"partitionsClaimed"`
	Messages          []Message `json:"messages"`
}

// Message is one message of a pop's answer.
type Message struct {
	ID            string  `json:"id"`
	TransactionID string  `json:"transactionId"`
	TraceID       *string `json:"traceId"`
	Traceparent   string  `json:"traceparent"`
	Data          any     `json:"data"`
	ProducerSub   *string `json:"producerSub"`
	CreatedAt     string  `json:"createdAt"`
	PartitionID   string  `json:"partitionId"`
	Partition     string  `json:"partition"`
	LeaseID       string  `json:"leaseId"`
	ConsumerGroup string  `json:"consumerGroup"`
}

// Pop pops path and decodes a 200; a 204 must have no body and gives nil.
// Any other status fails the test.
func (b *Broker) Pop(t testing.TB, path string) *Popped {
	t.Helper()
	r := b.Do(t, "GET", path, "", nil)
	switch r.Status {
	case http.StatusNoContent:
		if len(r.Body) != 0 {
			t.Fatalf("pop %s: 204 with a body: %s", path, r.Body)
		}
		return nil
	case http.StatusOK:
		var p Popped
		r.JSON(t, &p)
		return &p
	}
	t.Fatalf("pop %s: %d %s", path, r.Status, r.Body)
	return nil
}

// PopAll pops path until it answers 204 and returns every message, in the
// order they came; path should auto-ack or name a batch that drains. It
// gives up after 100 pops.
func (b *Broker) PopAll(t testing.TB, path string) []Message {
	t.Helper()
	var out []Message
	for range 100 {
		p := b.Pop(t, path)
		if p == nil {
			return out
		}
		out = append(out, p.Messages...)
	}
	t.Fatalf("pop %s never ran empty", path)
	return nil
}

// Ns returns the "n" of each numbered payload (see Numbered); none for a
// nil (204) answer.
func (p *Popped) Ns() []int {
	if p == nil {
		return nil
	}
	var out []int
	for _, m := range p.Messages {
		out = append(out, m.N())
	}
	return out
}

// N is the "n" of a numbered payload, or -1 when the payload is not one.
func (m Message) N() int {
	d, ok := m.Data.(map[string]any)
	if !ok {
		return -1
	}
	n, ok := d["n"].(float64)
	if !ok {
		return -1
	}
	return int(n)
}

// Scrape is b's /metrics, read from its metrics listener.
func (b *Broker) Scrape(t testing.TB) string {
	t.Helper()
	r, err := At(b.MetricsURL).Send("GET", "/metrics", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s/metrics = %d %s", b.MetricsURL, r.Status, r.Body)
	}
	return string(r.Body)
}

// Metric is the value of an unlabelled metric on b's /metrics, or 0 when
// b serves none of that name.
func (b *Broker) Metric(t testing.TB, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(b.Scrape(t), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// WaitParked waits until at least n long-poll pops are parked on b, so that
// what the test does next reaches them parked, not on their way in.
func (b *Broker) WaitParked(t testing.TB, n int) {
	t.Helper()
	Eventually(t, 30*time.Second, func() error {
		if parked := b.Metric(t, "regent_pops_parked"); parked < float64(n) {
			return fmt.Errorf("%v of %d pops parked", parked, n)
		}
		return nil
	})
}
