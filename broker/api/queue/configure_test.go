package queue_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

func TestConfigureAnswersEveryOptionWithDefaults(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	orders := b.Q("orders")
	resp := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": orders, "namespace": "ns",
		"options": map[string]any{"leaseTime": 10, "encryptionEnabled": true}})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	m := resp.Map(t)
	require.Equal(t, true, m["configured"])
	require.Equal(t, orders, m["queue"])
	require.Equal(t, "ns", m["namespace"])
	require.Nil(t, m["task"])
	require.NotEmpty(t, m["queueId"])
	require.NotEmpty(t, m["partitionId"])
	require.Equal(t, map[string]any{
		"leaseTime": 10.0, "retryLimit": 3.0, "retryDelay": 1000.0, "maxSize": 0.0, "ttl": 3600.0,
		"priority": 0.0, "delayedProcessing": 0.0, "windowBuffer": 0.0, "retentionSeconds": 0.0,
		"completedRetentionSeconds": 0.0, "retentionEnabled": false, "encryptionEnabled": true,
		"deadLetterQueue": false, "dlqAfterMaxRetries": false, "maxWaitTimeSeconds": 0.0,
		"dedupWindowSeconds": 3600.0, "storage": "rows",
	}, m["options"])
	require.Equal(t, map[string]string{"Default": m["partitionId"].(string)}, b.Stored(t, orders).Partitions)
}

func TestConfigureUpdatesAndResetsOptionsNotGiven(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	first := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q, "options": map[string]any{"retryLimit": 7}}).Map(t)
	second := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q, "options": map[string]any{"leaseTime": 5}}).Map(t)
	require.Equal(t, first["queueId"], second["queueId"])
	require.Equal(t, first["partitionId"], second["partitionId"])
	stored := b.Stored(t, q)
	require.Equal(t, 5, stored.LeaseTime)
	require.Equal(t, 3, stored.RetryLimit, "reset to its default")
}

// queue-admin-api.md §8: Queen's newer options are accepted, stored and
// echoed; storage is an echo only.
func TestConfigureStoresAndEchoesDedupWindowSecondsAndStorage(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	for _, storage := range []string{"segments", "rows"} {
		resp := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q,
			"options": map[string]any{"dedupWindowSeconds": 0, "storage": storage}})
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		o := resp.Map(t)["options"].(map[string]any)
		require.Equal(t, 0.0, o["dedupWindowSeconds"])
		require.Equal(t, storage, o["storage"])
		stored := b.Stored(t, q)
		require.Equal(t, new(0), stored.DedupWindow)
		require.Equal(t, storage, stored.Storage)
	}
	// Not given, the window is the broker's --dedup-window again: stored as
	// none, so that the flag's next value applies, and echoed as the flag.
	resp := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q, "options": map[string]any{"storage": "segments"}})
	require.Equal(t, 3600.0, resp.Map(t)["options"].(map[string]any)["dedupWindowSeconds"])
	require.Nil(t, b.Stored(t, q).DedupWindow)
}

func TestConfigureEchoesTheBrokersDedupWindowForAQueueThatSetsNone(t *testing.T) {
	t.Parallel()
	b := minuteDedup.Shared(t)
	resp := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": b.Q("q")})
	require.Equal(t, 60.0, resp.Map(t)["options"].(map[string]any)["dedupWindowSeconds"])
}

func TestConfigureAcceptsTheEmptyQueueName(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	resp := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": ""})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, true, resp.Map(t)["configured"])
	require.Contains(t, b.Stored(t, "").Partitions, "Default")
}

func TestConfigureRejectsBadQueueNameAndOptions(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	for _, body := range []any{
		map[string]any{},
		map[string]any{"queue": "has space"},
		map[string]any{"queue": 5},
		map[string]any{"queue": q, "options": map[string]any{"leaseTime": "long"}},
		map[string]any{"queue": q, "options": map[string]any{"leaseTime": 0}},
		map[string]any{"queue": q, "options": map[string]any{"retryLimit": -1}},
		map[string]any{"queue": q, "options": []any{}},
		map[string]any{"queue": q, "options": map[string]any{"dedupWindowSeconds": -1}},
		map[string]any{"queue": q, "options": map[string]any{"dedupWindowSeconds": 2147483648}},
		map[string]any{"queue": q, "options": map[string]any{"dedupWindowSeconds": "1h"}},
		map[string]any{"queue": q, "options": map[string]any{"storage": "columns"}},
		map[string]any{"queue": q, "options": map[string]any{"storage": ""}},
		map[string]any{"queue": q, "options": map[string]any{"storage": 1}},
	} {
		resp := b.Do(t, "POST", "/api/v1/configure", "", body)
		require.Equal(t, http.StatusBadRequest, resp.Status, "%v: %s", body, resp.Body)
		require.NotEmpty(t, resp.Map(t)["error"])
	}
	for _, name := range []string{q, "has space"} {
		require.False(t, b.Stored(t, name).Exists, name)
	}
}

func TestDeleteQueueCascadesAndAnswersWhenAbsent(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	goneQ := b.Q("gone")
	b.Push(t, map[string]any{"queue": goneQ, "payload": 1, "transactionId": "x"})
	p := b.Pop(t, "/api/v1/pop/queue/"+goneQ)
	require.NotNil(t, p)
	ack(t, b, map[string]any{"transactionId": "x", "partitionId": p.PartitionID, "leaseId": p.LeaseID, "status": "dlq"})
	id := b.Stored(t, goneQ).ID
	require.Len(t, b.Leftovers(t, id, p.PartitionID), 6, "a row in every table to delete but subscriptions")

	resp := b.Do(t, "DELETE", "/api/v1/resources/queues/"+goneQ, "", nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.Equal(t, map[string]any{"deleted": true, "queue": goneQ, "existed": true}, resp.Map(t))
	require.False(t, b.Stored(t, goneQ).Exists)
	require.Empty(t, b.Leftovers(t, id, p.PartitionID))
	resp = b.Do(t, "DELETE", "/api/v1/resources/queues/"+goneQ, "", nil)
	require.Equal(t, map[string]any{"deleted": true, "queue": goneQ, "existed": false}, resp.Map(t))

	// The cached ids are gone with it: a new push recreates the queue.
	out := b.Push(t, map[string]any{"queue": goneQ, "payload": 2, "transactionId": "x"})
	require.Equal(t, "queued", out[0]["status"])
	require.NotEqual(t, p.PartitionID, out[0]["partition_id"])
}

func TestDeleteQueueOnOneReplicaIsSeenByAnother(t *testing.T) {
	t.Parallel()
	a := brokertest.Shared(t)
	b := a.Replica(t)
	q := a.Q("shared")
	first := b.Push(t, map[string]any{"queue": q, "payload": 1})
	resp := a.Do(t, "DELETE", "/api/v1/resources/queues/"+q, "", nil)
	require.Equal(t, true, resp.Map(t)["existed"])
	// b still caches the deleted partition: its push must recover.
	out := b.Push(t, map[string]any{"queue": q, "payload": 2})
	require.Equal(t, "queued", out[0]["status"])
	require.NotEqual(t, first[0]["partition_id"], out[0]["partition_id"])
	require.Equal(t, 1, a.Stored(t, q).Segments)
}
