package queue_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

type popped struct {
	Success           bool      `json:"success"`
	Queue             string    `json:"queue"`
	Partition         string    `json:"partition"`
	PartitionID       string    `json:"partitionId"`
	LeaseID           string    `json:"leaseId"`
	ConsumerGroup     string    `json:"consumerGroup"`
	PartitionsClaimed int       `json:"partitionsClaimed"`
	Messages          []poppedM `json:"messages"`
}

type poppedM struct {
	ID            string         `json:"id"`
	TransactionID string         `json:"transactionId"`
	TraceID       *string        `json:"traceId"`
	Data          map[string]any `json:"data"`
	ProducerSub   *string        `json:"producerSub"`
	CreatedAt     string         `json:"createdAt"`
	PartitionID   string         `json:"partitionId"`
	Partition     string         `json:"partition"`
	LeaseID       string         `json:"leaseId"`
	ConsumerGroup string         `json:"consumerGroup"`
}

// pop pops and decodes a 200, or returns nil on 204.
func pop(t *testing.T, b *brokertest.Broker, path string) *popped {
	t.Helper()
	resp := b.Do(t, "GET", path, "", nil)
	switch resp.Status {
	case http.StatusNoContent:
		require.Empty(t, resp.Body)
		return nil
	case http.StatusOK:
		var p popped
		resp.JSON(t, &p)
		return &p
	}
	t.Fatalf("pop %s: %d %s", path, resp.Status, resp.Body)
	return nil
}

func ns(p *popped) []int {
	var out []int
	for _, m := range p.Messages {
		out = append(out, int(m.Data["n"].(float64)))
	}
	return out
}

func ack(t *testing.T, b *brokertest.Broker, body map[string]any) map[string]any {
	t.Helper()
	resp := b.Do(t, "POST", "/api/v1/ack", "", body)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var out []map[string]any
	resp.JSON(t, &out)
	require.Len(t, out, 1)
	return out[0]
}

func TestPopSmoke(t *testing.T) {
	b := brokertest.Start(t)
	push(t, b, msgs("q", "Default", 0, 5)...)
	p := pop(t, b, "/api/v1/pop/queue/q?batch=3")
	require.NotNil(t, p)
	require.Equal(t, []int{0, 1, 2}, ns(p))
	r := ack(t, b, map[string]any{"transactionId": p.Messages[2].TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID})
	require.Equal(t, true, r["success"], r)
	require.Equal(t, true, r["leaseReleased"], r)
	p = pop(t, b, "/api/v1/pop/queue/q?batch=10")
	require.Equal(t, []int{3, 4}, ns(p))
}
