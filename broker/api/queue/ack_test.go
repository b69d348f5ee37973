package queue_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

func ackBatch(t *testing.T, b *brokertest.Broker, body map[string]any) []map[string]any {
	t.Helper()
	resp := b.Do(t, "POST", "/api/v1/ack/batch", "", body)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var out []map[string]any
	resp.JSON(t, &out)
	return out
}

func TestAckAnswersEveryField(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "p", 0, 2)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2")
	r := ack(t, b, map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID})
	require.Equal(t, map[string]any{"index": 0.0, "transactionId": p.Messages[0].TransactionID, "success": true,
		"error": nil, "queueName": q, "partitionName": "p", "leaseReleased": false, "dlq": false}, r)
	r = ack(t, b, map[string]any{"transactionId": "nope", "partitionId": p.PartitionID})
	require.Equal(t, false, r["success"])
	require.Equal(t, "Message not found", r["error"])
}

func TestFullBatchAckReleasesTheLeaseAtOnce(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 4)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2")
	r := ackLast(t, b, p, "")
	require.Equal(t, true, r["leaseReleased"])
	c := b.Cursor(t, q)
	require.Nil(t, c.LeaseID)
	require.EqualValues(t, 2, c.Committed)
	require.Equal(t, []int{2, 3}, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2").Ns())
}

func TestAckBatchAnswersInRequestOrderInOneCall(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 3)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=3&consumerGroup=g")
	var acks []map[string]any
	for _, m := range p.Messages {
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": p.LeaseID})
	}
	acks = append(acks, map[string]any{"transactionId": "unknown", "partitionId": p.PartitionID})
	out := ackBatch(t, b, map[string]any{"acknowledgments": acks, "consumerGroup": "g"})
	require.Len(t, out, 4)
	for i, r := range out {
		require.EqualValues(t, i, r["index"])
		require.Equal(t, i < 3, r["success"], r)
	}
	require.Equal(t, true, out[2]["leaseReleased"])
	require.Equal(t, "Message not found", out[3]["error"])
	c := b.Cursor(t, q)
	require.Equal(t, "g", c.Group)
	require.EqualValues(t, 3, c.Committed)
	require.EqualValues(t, 3, c.TotalConsumed)
}

func TestCumulativeAckNeverMovesTheCursorBackwards(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 5)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=5")
	r := ack(t, b, map[string]any{"transactionId": p.Messages[3].TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID})
	require.Equal(t, true, r["success"])
	r = ack(t, b, map[string]any{"transactionId": p.Messages[1].TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID})
	require.Equal(t, true, r["success"], "an ack behind the cursor is already done")
	require.EqualValues(t, 4, b.Cursor(t, q).Committed)
}

func TestWrongOrExpiredLeaseIsRefusedPerItem(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q, "options": map[string]any{"leaseTime": 1}})
	b.Push(t, brokertest.Numbered(q, "Default", 0, 2)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2")
	out := ackBatch(t, b, map[string]any{"acknowledgments": []any{
		map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID, "leaseId": "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"},
		map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID},
	}})
	require.Equal(t, false, out[0]["success"])
	require.Equal(t, "Invalid or expired lease", out[0]["error"])
	require.Equal(t, true, out[1]["success"])
	b.ExpireLeases(t, q)
	r := ack(t, b, map[string]any{"transactionId": p.Messages[1].TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID})
	require.Equal(t, false, r["success"])
	require.Equal(t, "Invalid or expired lease", r["error"])
	require.EqualValues(t, 1, b.Cursor(t, q).Committed)
}

func TestAfterLeaseExpiryEverythingAfterTheCursorIsRedeliveredInOrder(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q, "options": map[string]any{"leaseTime": 1}})
	b.Push(t, brokertest.Numbered(q, "Default", 0, 3)...)
	b.Push(t, brokertest.Numbered(q, "Default", 3, 3)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=4")
	ack(t, b, map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID})
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10"))
	// The real clock: the parked pop is woken by the broker's own timer for
	// the lease's end, which no row in the database can move.
	p = b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&wait=true&timeout=3000")
	require.Equal(t, []int{1, 2, 3, 4, 5}, p.Ns())
}

func TestTwoConsumersOfOneGroupNeverHoldTheSamePartition(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	for _, part := range []string{"a", "b", "c"} {
		b.Push(t, brokertest.Numbered(q, part, 0, 50)...)
	}
	var mu sync.Mutex
	held := map[string]bool{}
	seen := map[string]int{}
	// A failure is noted here and reported after the consumers stop: a
	// require on their goroutines would end one of them with mu held, and
	// hang the others instead of failing the test.
	var twice []string
	var wg sync.WaitGroup
	for c := 0; c < 6; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=7")
				if p == nil {
					return
				}
				mu.Lock()
				if held[p.PartitionID] {
					twice = append(twice, p.Partition)
				}
				held[p.PartitionID] = true
				for _, m := range p.Messages {
					seen[m.ID]++
				}
				mu.Unlock()
				// Real time: the partition stays held a while, so that the
				// other consumers' pops meet it held; no event marks a pop
				// that found it held and took another.
				time.Sleep(time.Millisecond)
				// Give up the hold in the bookkeeping before the ack
				// releases the lease.
				mu.Lock()
				held[p.PartitionID] = false
				mu.Unlock()
				ackLast(t, b, p, "")
			}
		}()
	}
	wg.Wait()
	require.Empty(t, twice, "partitions leased to two consumers at once")
	require.Len(t, seen, 150)
	for id, n := range seen {
		require.Equal(t, 1, n, id)
	}
}

func TestFailedRedeliversTheBatchAndAfterRetryLimitGoesToTheDLQ(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q, "options": map[string]any{"retryLimit": 2, "retryDelay": 0}})
	b.Push(t, brokertest.Numbered(q, "Default", 0, 2)...)
	for round := 0; round < 2; round++ {
		p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2")
		require.Equal(t, []int{0, 1}, p.Ns(), "round %d", round)
		out := ackBatch(t, b, map[string]any{"acknowledgments": []any{
			map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID, "status": "failed", "leaseId": p.LeaseID},
			map[string]any{"transactionId": p.Messages[1].TransactionID, "partitionId": p.PartitionID, "status": "failed"},
		}})
		require.Equal(t, true, out[0]["success"])
		require.Equal(t, true, out[0]["leaseReleased"])
		require.Equal(t, false, out[0]["dlq"])
		require.Equal(t, true, out[1]["success"])
		require.Equal(t, round+1, b.Cursor(t, q).RetryCount, "once per leased batch")
	}
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2")
	r := ack(t, b, map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID,
		"status": "failed", "error": "boom"})
	require.Equal(t, true, r["dlq"])
	require.Equal(t, true, r["leaseReleased"])
	require.Equal(t, []int{1}, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2").Ns(), "the cursor moved past the dead letter")

	resp := b.Do(t, "GET", "/api/v1/dlq?queue="+q, "", nil)
	require.Equal(t, http.StatusOK, resp.Status)
	m := resp.Map(t)
	require.EqualValues(t, 1, m["total"])
	require.Equal(t, map[string]any{"limit": 100.0, "offset": 0.0}, m["pagination"])
	d := m["messages"].([]any)[0].(map[string]any)
	require.Equal(t, p.Messages[0].ID, d["id"])
	require.Equal(t, p.Messages[0].TransactionID, d["transactionId"])
	require.Equal(t, p.PartitionID, d["partitionId"])
	require.Equal(t, q, d["queue"])
	require.Equal(t, "Default", d["partition"])
	require.Equal(t, "__QUEUE_MODE__", d["consumerGroup"])
	require.Equal(t, "boom", d["errorMessage"])
	require.EqualValues(t, 2, d["retryCount"])
	require.Equal(t, map[string]any{"n": 0.0}, d["data"])
	require.Equal(t, p.Messages[0].CreatedAt, d["createdAt"])
	require.Regexp(t, `Z$`, d["failedAt"])
}

func TestAckStatusDLQAndRetry(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 3)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=3")
	r := ack(t, b, map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID, "status": "dlq"})
	require.Equal(t, true, r["dlq"])
	require.Equal(t, false, r["leaseReleased"])
	r = ack(t, b, map[string]any{"transactionId": p.Messages[1].TransactionID, "partitionId": p.PartitionID, "status": "retry"})
	require.Equal(t, true, r["leaseReleased"])
	require.Equal(t, []int{1, 2}, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=3").Ns())
	require.Equal(t, 0, b.Cursor(t, q).RetryCount, "retry does not count")
}

func TestDLQFiltersAndPaginates(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 3)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=3&consumerGroup=g")
	for _, m := range p.Messages {
		ack(t, b, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "dlq", "consumerGroup": "g"})
	}
	m := b.Do(t, "GET", "/api/v1/dlq?queue="+q+"&consumerGroup=g&limit=2&offset=1", "", nil).Map(t)
	require.EqualValues(t, 3, m["total"])
	require.Len(t, m["messages"], 2)
	m = b.Do(t, "GET", "/api/v1/dlq?consumerGroup="+b.Q("other"), "", nil).Map(t)
	require.EqualValues(t, 0, m["total"])
	require.Equal(t, []any{}, m["messages"])
	require.Equal(t, http.StatusBadRequest, b.Do(t, "GET", "/api/v1/dlq?limit=-1", "", nil).Status)
}

func TestLeaseExtend(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q, "options": map[string]any{"leaseTime": 1}})
	b.Push(t, brokertest.Numbered(q, "Default", 0, 1)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q)
	resp := b.Do(t, "POST", "/api/v1/lease/"+p.LeaseID+"/extend", "", map[string]any{})
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var out []map[string]any
	resp.JSON(t, &out)
	require.Equal(t, true, out[0]["success"])
	require.EqualValues(t, 0, out[0]["index"])
	require.Equal(t, p.LeaseID, out[0]["leaseId"])
	exp, err := time.Parse(time.RFC3339Nano, out[0]["expiresAt"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(60*time.Second), exp, 5*time.Second, "default 60 s")
	b.Age(t, q, 2*time.Second) // past the queue's leaseTime of 1 s, not the extension's 60 s
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q), "still leased")

	resp = b.Do(t, "POST", "/api/v1/lease/0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f/extend", "", map[string]any{"seconds": 5})
	resp.JSON(t, &out)
	require.Equal(t, false, out[0]["success"])
	require.Equal(t, "Lease not found", out[0]["error"])

	b.ExpireLeases(t, q)
	resp = b.Do(t, "POST", "/api/v1/lease/"+p.LeaseID+"/extend", "", map[string]any{"seconds": 5})
	resp.JSON(t, &out)
	require.Equal(t, false, out[0]["success"])
	require.Equal(t, "Lease already expired", out[0]["error"])
}

func TestFailedBatchIsDeliveredAgainAfterRetryDelay(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q, "options": map[string]any{"retryDelay": 300}})
	b.Push(t, brokertest.Numbered(q, "Default", 0, 2)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2")
	failed := time.Now()
	r := ack(t, b, map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.PartitionID, "status": "failed"})
	require.Equal(t, true, r["leaseReleased"])
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2"), "not before retryDelay")
	p = b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2&wait=true&timeout=5000")
	require.Equal(t, []int{0, 1}, p.Ns())
	require.GreaterOrEqual(t, time.Since(failed), 300*time.Millisecond)
}

func TestAckBatchNamesEachResultsOwnQueueAndPartition(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q1 := b.Q("q1")
	q2 := b.Q("q2")
	b.Push(t, brokertest.Numbered(q1, "p1", 0, 2)...)
	b.Push(t, brokertest.Numbered(q2, "p2", 0, 1)...)
	p1 := b.Pop(t, "/api/v1/pop/queue/"+q1+"?batch=2")
	p2 := b.Pop(t, "/api/v1/pop/queue/"+q2+"?batch=1")
	out := ackBatch(t, b, map[string]any{"acknowledgments": []map[string]any{
		{"transactionId": p1.Messages[0].TransactionID, "partitionId": p1.PartitionID, "leaseId": p1.LeaseID},
		{"transactionId": "unknown", "partitionId": "00000000-0000-4000-8000-000000000001"},
		{"transactionId": p2.Messages[0].TransactionID, "partitionId": p2.PartitionID, "leaseId": p2.LeaseID},
		{"transactionId": p1.Messages[1].TransactionID, "partitionId": p1.PartitionID, "leaseId": p1.LeaseID},
	}})
	var names [][2]any
	for _, r := range out {
		names = append(names, [2]any{r["queueName"], r["partitionName"]})
	}
	require.Equal(t, [][2]any{{q1, "p1"}, {nil, nil}, {q2, "p2"}, {q1, "p1"}}, names)
}
