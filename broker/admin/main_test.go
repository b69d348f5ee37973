package admin_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// start starts a broker whose hot list is never reseeded during a test, so
// that a pop finds a partition only when something announced it.
func start(t *testing.T, opts ...brokertest.Option) *brokertest.Broker {
	t.Helper()
	return brokertest.Start(t, append([]brokertest.Option{func(c *config.Config) { c.ReseedInterval = time.Hour }}, opts...)...)
}

// push pushes n messages with payload {"n": from+i} to queue/partition.
func push(t *testing.T, b *brokertest.Broker, queue, partition string, from, n int) {
	t.Helper()
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"queue": queue, "partition": partition, "payload": map[string]any{"n": from + i}}
	}
	if r := b.Do(t, "POST", "/api/v1/push", "", map[string]any{"items": items}); r.Status != http.StatusCreated {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
}

type popped struct {
	LeaseID     string `json:"leaseId"`
	PartitionID string `json:"partitionId"`
	Messages    []struct {
		TransactionID string         `json:"transactionId"`
		PartitionID   string         `json:"partitionId"`
		CreatedAt     string         `json:"createdAt"`
		Data          map[string]int `json:"data"`
	} `json:"messages"`
}

// pop pops path and returns the payload numbers; none for a 204.
func pop(t *testing.T, b *brokertest.Broker, path string) (popped, []int) {
	t.Helper()
	r := b.Do(t, "GET", path, "", nil)
	var p popped
	switch r.Status {
	case http.StatusNoContent:
		return p, nil
	case http.StatusOK:
		r.JSON(t, &p)
	default:
		t.Fatalf("pop %s: %d %s", path, r.Status, r.Body)
	}
	var ns []int
	for _, m := range p.Messages {
		ns = append(ns, m.Data["n"])
	}
	return p, ns
}

// call sends a request and requires the status.
func call(t *testing.T, b *brokertest.Broker, want int, method, path string, body any) brokertest.Response {
	t.Helper()
	r := b.Do(t, method, path, "", body)
	if r.Status != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, r.Status, r.Body, want)
	}
	return r
}

func array(t *testing.T, r brokertest.Response) []map[string]any {
	t.Helper()
	var out []map[string]any
	r.JSON(t, &out)
	return out
}
