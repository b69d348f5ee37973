package queue_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/test/brokertest"
)

// tenancy is the broker of the tests that need tenancy on in either mode;
// each test's tenants are named within its namespace.
var tenancy = brokertest.NewGroup(brokertest.WithJWT(true))

func TestTenantsHaveSeparateQueuesOfTheSameName(t *testing.T) {
	t.Parallel()
	b := tenancy.Shared(t)
	acme, other := b.Q("acme"), b.Q("other")
	a, o := brokertest.Mint(t, acme, auth.ReadWrite), brokertest.Mint(t, other, auth.ReadWrite)
	resp := b.Do(t, "POST", "/api/v1/push", a, map[string]any{"items": brokertest.Numbered("q", "Default", 0, 1)})
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	require.Equal(t, http.StatusNoContent, b.Do(t, "GET", "/api/v1/pop/queue/q", o, nil).Status)
	require.Equal(t, http.StatusNoContent, b.Do(t, "GET", "/api/v1/pop/queue/q/partition/Default", o, nil).Status)
	resp = b.Do(t, "GET", "/api/v1/pop/queue/q", a, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var p brokertest.Popped
	resp.JSON(t, &p)
	require.Equal(t, "test-"+acme, *p.Messages[0].ProducerSub, "the token's sub is stamped")
	b.Do(t, "POST", "/api/v1/push", o, map[string]any{"items": brokertest.Numbered("q", "Default", 5, 1)})
	for _, tenant := range []string{acme, other} {
		q, err := b.DB.Queue(t.Context(), tenant, "q")
		require.NoError(t, err)
		require.True(t, q.Exists, tenant)
	}
	resp = b.Do(t, "GET", "/api/v1/pop/queue/q", o, nil)
	resp.JSON(t, &p)
	require.Equal(t, []int{5}, p.Ns())
}

func TestAckAndLeaseNeverReachAnotherTenantsPartition(t *testing.T) {
	t.Parallel()
	b := tenancy.Shared(t)
	acme, other := b.Q("acme"), b.Q("other")
	a, o := brokertest.Mint(t, acme, auth.ReadWrite), brokertest.Mint(t, other, auth.ReadWrite)
	b.Do(t, "POST", "/api/v1/push", a, map[string]any{"items": brokertest.Numbered("q", "Default", 0, 2)})
	var p brokertest.Popped
	b.Do(t, "GET", "/api/v1/pop/queue/q?batch=2", a, nil).JSON(t, &p)
	require.Len(t, p.Messages, 2)

	var out []map[string]any
	b.Do(t, "POST", "/api/v1/ack", o, map[string]any{"transactionId": p.Messages[1].TransactionID,
		"partitionId": p.PartitionID}).JSON(t, &out)
	require.Equal(t, false, out[0]["success"])
	require.Equal(t, "Message not found", out[0]["error"])
	require.Nil(t, out[0]["queueName"], "nothing about the other tenant's queue leaks")

	b.Do(t, "POST", "/api/v1/lease/"+p.LeaseID+"/extend", o, map[string]any{"seconds": 600}).JSON(t, &out)
	require.Equal(t, "Lease not found", out[0]["error"])

	resp := b.Do(t, "POST", "/api/v1/transaction", o, map[string]any{"operations": []any{map[string]any{
		"type": "ack", "transactionId": p.Messages[1].TransactionID, "partitionId": p.PartitionID}}})
	require.Equal(t, false, resp.Map(t)["success"])
	c, err := b.DB.Cursors(t.Context(), acme, "q")
	require.NoError(t, err)
	require.Len(t, c, 1)
	require.Zero(t, c[0].Committed)
	require.NotNil(t, c[0].LeaseID)
	resp = b.Do(t, "GET", "/api/v1/dlq", o, nil)
	require.EqualValues(t, 0, resp.Map(t)["total"])
}

func TestQueueDeletionNeedsAdmin(t *testing.T) {
	t.Parallel()
	b := tenancy.Shared(t)
	acme := b.Q("acme")
	resp := b.Do(t, "DELETE", "/api/v1/resources/queues/q", brokertest.Mint(t, acme, auth.ReadWrite), nil)
	require.Equal(t, http.StatusForbidden, resp.Status)
	resp = b.Do(t, "DELETE", "/api/v1/resources/queues/q", brokertest.Mint(t, acme, auth.Admin), nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.Equal(t, http.StatusForbidden, b.Do(t, "POST", "/api/v1/push", brokertest.Mint(t, acme, auth.ReadOnly), `{"items": []}`).Status)
	require.Equal(t, http.StatusOK, b.Do(t, "GET", "/api/v1/dlq", brokertest.Mint(t, acme, auth.ReadOnly), nil).Status)
	require.Equal(t, http.StatusUnauthorized, b.Do(t, "GET", "/api/v1/pop/queue/q", brokertest.NoToken, nil).Status)
}
