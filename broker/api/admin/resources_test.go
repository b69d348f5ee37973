package admin_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

// counted sets up queue q: partition a with 5 messages, of which the queue
// mode acked 1, holds 2 under a live lease and dead-lettered none; partition
// b with 2 messages and no cursor; and a dead letter in c.
func counted(t *testing.T) *brokertest.Broker {
	t.Helper()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "a", 0, 5)
	b.PushN(t, "q", "b", 0, 2)
	pushTx(t, b, "q", "c", "poison")
	p := b.Pop(t, "/api/v1/pop/queue/q/partition/a?batch=1")
	b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": p.Messages[0].TransactionID,
		"partitionId": p.PartitionID, "leaseId": p.LeaseID})
	b.Pop(t, "/api/v1/pop/queue/q/partition/a?batch=2")
	p = b.Pop(t, "/api/v1/pop/queue/q/partition/c?batch=1")
	b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": "poison",
		"partitionId": p.PartitionID, "leaseId": p.LeaseID, "status": "dlq"})
	return b
}

// deadLettered reads path until its lifetime messages count counted's dead
// letter, that is until the counters are flushed (5 s at most).
func deadLettered(t *testing.T, b *brokertest.Broker, path string) map[string]any {
	t.Helper()
	var m map[string]any
	brokertest.Eventually(t, 5*time.Second, func() error {
		m = b.Call(t, http.StatusOK, "GET", path, nil).Map(t)
		if m["messages"].(map[string]any)["deadLetter"] != 1.0 {
			return fmt.Errorf("%s never counted the dead letter: %v", path, m["messages"])
		}
		return nil
	})
	return m
}

func TestResourceQueuesCountFromPartitionEndsAndCursorsWithPendingExcludingProcessing(t *testing.T) {
	t.Parallel()
	b := counted(t)
	b.PushN(t, "other", "Default", 0, 1)
	var got struct {
		Queues []map[string]any `json:"queues"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/resources/queues", nil).JSON(t, &got)
	require.Len(t, got.Queues, 2)
	require.Equal(t, "other", got.Queues[0]["name"], "newest first")
	q := got.Queues[1]
	require.Equal(t, "q", q["name"])
	require.EqualValues(t, 3, q["partitions"])
	// a: 5 stored, 4 after the cursor of which 2 leased; b: 2, no cursor; c: 1, dead.
	require.Equal(t, map[string]any{"total": 8.0, "pending": 4.0, "processing": 2.0}, q["messages"])
	for _, k := range []string{"id", "namespace", "task", "createdAt", "partitionCount", "leaseTime", "retryLimit", "maxSize", "encryptionEnabled"} {
		require.Contains(t, q, k)
	}
}

func TestResourceQueueListsPartitionsByNameWithSixCountersAndPendingIncludingProcessing(t *testing.T) {
	t.Parallel()
	b := counted(t)
	m := b.Call(t, http.StatusOK, "GET", "/api/v1/resources/queues/q", nil).Map(t)
	ps := m["partitions"].([]any)
	require.Len(t, ps, 3)
	a, pb, c := ps[0].(map[string]any), ps[1].(map[string]any), ps[2].(map[string]any)
	require.Equal(t, "a", a["name"])
	require.Equal(t, map[string]any{"total": 5.0, "pending": 4.0, "processing": 2.0, "completed": 1.0, "failed": 0.0, "deadLetter": 0.0}, a["stats"])
	require.Equal(t, map[string]any{"total": 2.0, "pending": 2.0, "processing": 0.0, "completed": 0.0, "failed": 0.0, "deadLetter": 0.0}, pb["stats"],
		"a partition without a cursor counts as one queue-mode group at the beginning")
	require.Equal(t, map[string]any{"total": 1.0, "pending": 0.0, "processing": 0.0, "completed": 0.0, "failed": 0.0, "deadLetter": 1.0}, c["stats"])
	require.NotNil(t, a["oldestMessage"])
	require.NotNil(t, a["newestMessage"])
	require.Nil(t, c["oldestMessage"], "nothing pending")
	require.Equal(t, map[string]any{"total": 8.0, "pending": 6.0, "processing": 2.0, "completed": 1.0, "failed": 0.0, "deadLetter": 1.0}, m["totals"])
}

func TestEachCounterOfAPartitionIsItsMaximumOverGroups(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "p", 0, 4)
	b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=3&autoAck=true&consumerGroup=fast")
	b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=1&autoAck=true&consumerGroup=slow")
	b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2&consumerGroup=fast")
	m := b.Call(t, http.StatusOK, "GET", "/api/v1/resources/queues/"+q, nil).Map(t)
	stats := m["partitions"].([]any)[0].(map[string]any)["stats"]
	require.Equal(t, map[string]any{"total": 4.0, "pending": 3.0, "processing": 1.0, "completed": 1.0, "failed": 0.0, "deadLetter": 0.0}, stats,
		"pending is slow's 3, processing fast's leased 1")
}

func TestAnUnknownQueueIs404QueueNotFound(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	nope := b.Q("nope")
	for _, path := range []string{"/api/v1/resources/queues/" + nope, "/api/v1/status/queues/" + nope, "/api/v1/status/queues/a%00b"} {
		r := b.Call(t, http.StatusNotFound, "GET", path, nil)
		require.JSONEq(t, `{"error": "Queue not found"}`, string(r.Body), path)
	}
}

func TestNamespacesAndTasksListTheNonEmptyValuesSortedWithTheirCounts(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q1 := b.Q("q1")
	q2 := b.Q("q2")
	q3 := b.Q("q3")
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q1, "namespace": "zeta", "task": "t"})
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q2, "namespace": "alpha", "task": "t"})
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q3})
	b.PushN(t, q1, "a", 0, 2)
	b.PushN(t, q2, "a", 0, 1)
	b.PushN(t, q2, "b", 0, 1)
	var ns struct {
		Namespaces []map[string]any `json:"namespaces"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/resources/namespaces", nil).JSON(t, &ns)
	require.Len(t, ns.Namespaces, 2)
	require.Equal(t, "alpha", ns.Namespaces[0]["namespace"])
	require.EqualValues(t, 1, ns.Namespaces[0]["queues"])
	require.EqualValues(t, 3, ns.Namespaces[0]["partitions"], "a, b and configure's Default")
	require.Equal(t, map[string]any{"total": 2.0, "pending": 2.0}, ns.Namespaces[0]["messages"])
	require.Equal(t, "zeta", ns.Namespaces[1]["namespace"])
	var ts struct {
		Tasks []map[string]any `json:"tasks"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/resources/tasks", nil).JSON(t, &ts)
	require.Len(t, ts.Tasks, 1)
	require.Equal(t, "t", ts.Tasks[0]["task"])
	require.EqualValues(t, 2, ts.Tasks[0]["queues"])
	require.Equal(t, map[string]any{"total": 4.0, "pending": 4.0}, ts.Tasks[0]["messages"])
}

func TestOverviewCountsRowsDistinctValuesAndLifetimeMessages(t *testing.T) {
	t.Parallel()
	b := counted(t)
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "q", "namespace": "n", "task": "t"})
	m := deadLettered(t, b, "/api/v1/resources/overview")
	require.EqualValues(t, 1, m["queues"])
	require.EqualValues(t, 4, m["partitions"], "a, b, c and configure's Default")
	require.EqualValues(t, 1, m["namespaces"])
	require.EqualValues(t, 1, m["tasks"])
	require.Equal(t, map[string]any{"total": 8.0, "pending": 4.0, "processing": 2.0, "completed": 2.0, "failed": 0.0, "deadLetter": 1.0}, m["messages"],
		"every message pushed; the successful acks, the dead-lettering one included; the rejected acks; the messages dead-lettered")
	lag := m["lag"].(map[string]any)
	require.Equal(t, map[string]any{"avg": 1.5, "median": 1.0, "min": 0.0, "max": 4.0}, lag["offset"], "pending 4, 2, 0 and 0 in Default")
	require.Contains(t, lag, "time")
	require.Contains(t, m["throughput"], "ingestedPerSecond")
	require.EqualValues(t, 0, m["statsAge"], "counted live")
	require.NotNil(t, m["timestamp"])
}

func TestStatusQueuesFiltersByNamespaceAndTaskAndPagesNewestFirst(t *testing.T) {
	t.Parallel()
	b := counted(t)
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "n1", "namespace": "x"})
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "n2", "namespace": "x", "task": "y"})
	var got struct {
		Queues     []map[string]any `json:"queues"`
		Pagination map[string]any   `json:"pagination"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/status/queues?queue=ignored", nil).JSON(t, &got)
	require.Len(t, got.Queues, 3)
	require.Equal(t, map[string]any{"limit": 100.0, "offset": 0.0}, got.Pagination)
	q := got.Queues[2]
	require.Equal(t, "q", q["name"])
	require.Equal(t, map[string]any{"total": 8.0, "pending": 6.0, "processing": 2.0, "completed": 1.0}, q["messages"])
	b.Call(t, http.StatusOK, "GET", "/api/v1/status/queues?namespace=x", nil).JSON(t, &got)
	require.Len(t, got.Queues, 2)
	b.Call(t, http.StatusOK, "GET", "/api/v1/status/queues?namespace=x&task=y", nil).JSON(t, &got)
	require.Len(t, got.Queues, 1)
	require.Equal(t, "n2", got.Queues[0]["name"])
	b.Call(t, http.StatusOK, "GET", "/api/v1/status/queues?limit=1&offset=1", nil).JSON(t, &got)
	require.Len(t, got.Queues, 1)
	require.Equal(t, "n1", got.Queues[0]["name"])
	b.Call(t, http.StatusOK, "GET", "/api/v1/status/queues?limit=1&offset=99", nil).JSON(t, &got)
	require.Empty(t, got.Queues)
}

func TestStatusQueueHasConfigPartitionsCursorsAndTotals(t *testing.T) {
	t.Parallel()
	b := counted(t)
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "q",
		"options": map[string]any{"maxSize": 50, "deadLetterQueue": true, "priority": 4}})
	m := b.Call(t, http.StatusOK, "GET", "/api/v1/status/queues/q?includePartitions=true", nil).Map(t)
	q := m["queue"].(map[string]any)
	require.EqualValues(t, 4, q["priority"])
	require.Equal(t, map[string]any{"leaseTime": 300.0, "retryLimit": 3.0, "retryDelay": 1000.0, "ttl": 3600.0,
		"maxQueueSize": 50.0, "deadLetterQueue": true}, q["config"])
	ps := m["partitions"].([]any)
	require.Len(t, ps, 4, "a, b, c and configure's Default")
	a := ps[0].(map[string]any)
	require.Equal(t, "Default", a["name"], "sorted by name")
	a = ps[1].(map[string]any)
	require.Equal(t, a["messages"], a["stats"])
	require.Equal(t, map[string]any{"totalConsumed": 1.0, "batchesConsumed": 0.0}, a["cursor"])
	require.NotNil(t, a["lastActivity"])
	totals := m["totals"].(map[string]any)
	require.EqualValues(t, 8, totals["total"])
	require.EqualValues(t, 6, totals["pending"])
	require.Equal(t, totals["messages"].(map[string]any)["deadLetter"], 1.0)
}

func TestStatusLaysOutBucketsByTheRangeNewestFirst(t *testing.T) {
	t.Parallel()
	b := counted(t)
	to := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		span   time.Duration
		width  int
		points int
	}{{time.Hour, 1, 61}, {6 * time.Hour, 5, 73}, {24 * time.Hour, 15, 97}, {7 * 24 * time.Hour, 60, 169}, {30 * 24 * time.Hour, 360, 121}} {
		q := "from=" + url.QueryEscape(to.Add(-c.span).Format(time.RFC3339)) + "&to=" + url.QueryEscape(to.Format(time.RFC3339))
		m := b.Call(t, http.StatusOK, "GET", "/api/v1/status?"+q, nil).Map(t)
		require.EqualValues(t, c.width, m["bucketMinutes"], c.span)
		rows := m["throughput"].([]any)
		require.Len(t, rows, c.points, c.span)
		require.EqualValues(t, c.points, m["pointCount"])
		require.Equal(t, "2026-05-06T12:00:00Z", rows[0].(map[string]any)["timestamp"], "newest first, second precision")
	}
}

func TestStatusCountsQueuesLeasesAndDeadLetters(t *testing.T) {
	t.Parallel()
	b := counted(t)
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "empty"})
	m := deadLettered(t, b, "/api/v1/status")
	queues := m["queues"].([]any)
	require.Len(t, queues, 1, "only queues that hold messages")
	require.Equal(t, "q", queues[0].(map[string]any)["name"])
	require.EqualValues(t, 2, queues[0].(map[string]any)["totalConsumed"])
	msgs := m["messages"].(map[string]any)
	require.EqualValues(t, 8, msgs["total"])
	require.EqualValues(t, 0, msgs["processing"])
	require.EqualValues(t, 1, msgs["deadLetter"])
	require.Equal(t, map[string]any{"active": 1.0, "partitionsWithLeases": 1.0, "totalBatchSize": 2.0, "totalAcked": 0.0}, m["leases"])
	dlq := m["deadLetterQueue"].(map[string]any)
	require.EqualValues(t, 1, dlq["totalMessages"])
	require.EqualValues(t, 1, dlq["affectedPartitions"])
	require.Len(t, dlq["topErrors"], 1)
	workers := m["workers"].([]any)
	require.Len(t, workers, 1)
	require.Contains(t, workers[0], "hostname")
	require.NotNil(t, workers[0].(map[string]any)["dbConnections"])
	require.Empty(t, b.Call(t, http.StatusOK, "GET", "/api/v1/status?queue=other", nil).Map(t)["queues"])
}

func TestStatusWithAnUnparsableOrReversedRangeIs400(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	for _, q := range []string{"from=x", "to=2026-05-06", "from=2026-05-06T12:00:00Z&to=2026-05-06T11:00:00Z"} {
		require.NotEmpty(t, b.Call(t, http.StatusBadRequest, "GET", "/api/v1/status?"+q, nil).Map(t)["error"], q)
	}
}

func TestStatusBuffersReportsThisReplicasSpoolAndTheDatabase(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	r := b.Call(t, http.StatusOK, "GET", "/api/v1/status/buffers", nil)
	require.JSONEq(t, `{"pending": 0, "failed": 0, "dbHealthy": true, "worker": 0}`, string(r.Body))
}
