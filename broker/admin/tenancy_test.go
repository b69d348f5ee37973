package admin_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/auth"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestTenantBProbingTenantAsGroupsAndQueuesReadsExactlyLikeMissing(t *testing.T) {
	t.Parallel()
	b := start(t, brokertest.WithJWT(true))
	a, other := brokertest.Mint(t, "acme", auth.Admin), brokertest.Mint(t, "other", auth.Admin)
	probes := []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/v1/consumer-groups", nil},
		{"GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", nil},
		{"GET", "/api/v1/consumer-groups/g", nil},
		{"POST", "/api/v1/consumer-groups/g/queues/q/seek", map[string]any{"toEnd": true}},
		{"POST", "/api/v1/consumer-groups/g/queues/q/seek", map[string]any{"timestamp": "1970-01-01T00:00:00Z"}},
		{"POST", "/api/v1/consumer-groups/g/queues/q/partitions/p/seek", nil},
		{"POST", "/api/v1/consumer-groups/g/subscription", map[string]any{"subscriptionTimestamp": "2030-01-01T00:00:00Z"}},
		{"DELETE", "/api/v1/consumer-groups/g/queues/q", nil},
		{"DELETE", "/api/v1/consumer-groups/g", nil},
	}
	probe := func() []brokertest.Response {
		var out []brokertest.Response
		for _, p := range probes {
			r := b.Do(t, p.method, p.path, other, p.body)
			r.Header = nil
			out = append(out, r)
		}
		return out
	}
	missing := probe() // nothing of that name exists anywhere yet

	pushAs := func(n int) {
		items := []map[string]any{}
		for i := range n {
			items = append(items, map[string]any{"queue": "q", "partition": "p", "payload": map[string]any{"n": i}})
		}
		require.Equal(t, http.StatusCreated, b.Do(t, "POST", "/api/v1/push", a, map[string]any{"items": items}).Status)
	}
	pushAs(3)
	r := b.Do(t, "GET", "/api/v1/pop/queue/q/partition/p?batch=1&consumerGroup=g&subscriptionFrom=1970-01-01T00:00:01Z", a, nil)
	require.Equal(t, http.StatusOK, r.Status)
	var p popped
	r.JSON(t, &p)
	before := b.Do(t, "GET", "/api/v1/consumer-groups/g", a, nil)
	beforeList := b.Do(t, "GET", "/api/v1/consumer-groups", a, nil)

	foreign := probe()
	for i := range probes {
		require.Equal(t, missing[i], foreign[i], "%s %s: another tenant's names must read like missing ones", probes[i].method, probes[i].path)
	}

	// And nothing of A's moved.
	require.Equal(t, string(before.Body), string(b.Do(t, "GET", "/api/v1/consumer-groups/g", a, nil).Body))
	require.Equal(t, string(beforeList.Body), string(b.Do(t, "GET", "/api/v1/consumer-groups", a, nil).Body))
	var acks []map[string]any
	b.Do(t, "POST", "/api/v1/ack", a, map[string]any{"transactionId": p.Messages[0].TransactionID,
		"partitionId": p.PartitionID, "leaseId": p.LeaseID, "consumerGroup": "g"}).JSON(t, &acks)
	require.Equal(t, true, acks[0]["success"], "A's lease survived B's seeks and deletions: %v", acks)
}
