package queue_test

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
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

// ackLast acks the last message of a pop (cumulative: the whole batch).
func ackLast(t *testing.T, b *brokertest.Broker, p *brokertest.Popped, group string) map[string]any {
	t.Helper()
	m := p.Messages[len(p.Messages)-1]
	return ack(t, b, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
		"leaseId": p.LeaseID, "consumerGroup": group})
}

func TestPopEmptyIs204WithNoBody(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	nothing := b.Q("nothing")
	q := b.Q("q")
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+nothing))
	b.Push(t, brokertest.Numbered(q, "Default", 0, 1)...)
	require.NotNil(t, b.Pop(t, "/api/v1/pop/queue/"+q))
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q), "the only message is leased")
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/other"))
}

func TestPopAnswersEveryFieldWithDataAsPayloadKey(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	trace := "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
	out := b.Push(t, map[string]any{"queue": q, "partition": "p1", "payload": map[string]any{"k": "v"},
		"transactionId": "tx-1", "traceId": trace, "producerSub": "ignored"})
	resp := b.Do(t, "GET", "/api/v1/pop/queue/"+q, "", nil)
	require.Equal(t, http.StatusOK, resp.Status)
	m := resp.Map(t)
	require.Equal(t, true, m["success"])
	require.Equal(t, q, m["queue"])
	require.Equal(t, "p1", m["partition"])
	require.Equal(t, out[0]["partition_id"], m["partitionId"])
	require.Equal(t, "__QUEUE_MODE__", m["consumerGroup"])
	require.EqualValues(t, 1, m["partitionsClaimed"])
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-7`, m["leaseId"], "lease ids are UUIDv7")
	msg := m["messages"].([]any)[0].(map[string]any)
	var sub any // the body's producerSub is ignored; only a token's sub is stamped
	if b.Subject != "" {
		sub = b.Subject
	}
	require.Equal(t, map[string]any{
		"id": out[0]["message_id"], "transactionId": "tx-1", "traceId": trace, "data": map[string]any{"k": "v"},
		"producerSub": sub, "createdAt": msg["createdAt"], "partitionId": out[0]["partition_id"], "partition": "p1",
		"leaseId": m["leaseId"], "consumerGroup": "__QUEUE_MODE__",
	}, msg)
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-7`, msg["id"], "message ids are UUIDv7")
}

func TestPopCreatedAtIsMicrosecondUTC(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	before := time.Now().UTC()
	b.Push(t, brokertest.Numbered(q, "Default", 0, 1)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q)
	require.Regexp(t, regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`), p.Messages[0].CreatedAt)
	at, err := time.Parse(time.RFC3339Nano, p.Messages[0].CreatedAt)
	require.NoError(t, err)
	require.WithinDuration(t, before, at, 5*time.Second)
}

func TestPopPayloadNullAndDataAlias(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, map[string]any{"queue": q, "payload": nil}, map[string]any{"queue": q, "data": []any{1, "two"}}, map[string]any{"queue": q})
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=3")
	require.Nil(t, p.Messages[0].Data)
	require.Equal(t, []any{1.0, "two"}, p.Messages[1].Data)
	require.Nil(t, p.Messages[2].Data)
}

func TestPopBatchDefaultsToOne(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 3)...)
	require.Equal(t, []int{0}, b.Pop(t, "/api/v1/pop/queue/"+q).Ns())
}

func TestOrderWithinPartitionIsPushOrderAcrossSegmentsAndRequests(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	for i := 0; i < 5; i++ {
		b.Push(t, brokertest.Numbered(q, "Default", i*7, 7)...)
	}
	var got []int
	for {
		p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=4")
		if p == nil {
			break
		}
		got = append(got, p.Ns()...)
		ackLast(t, b, p, "")
	}
	require.Equal(t, seq(0, 35), got)
}

func TestPopPartitionRouteClaimsThatPartitionOnly(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "a", 0, 2)...)
	b.Push(t, brokertest.Numbered(q, "b", 100, 2)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/b?batch=10")
	require.Equal(t, "b", p.Partition)
	require.Equal(t, []int{100, 101}, p.Ns())
}

func TestPopPartitionsShareTheBatchBudget(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	for _, part := range []string{"a", "b", "c"} {
		b.Push(t, brokertest.Numbered(q, part, 0, 3)...)
	}
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=5&partitions=3")
	require.Equal(t, 2, p.PartitionsClaimed)
	require.Len(t, p.Messages, 5)
	parts := map[string]int{}
	for _, m := range p.Messages {
		parts[m.Partition]++
		require.Equal(t, p.LeaseID, m.LeaseID, "one lease per pop request")
	}
	require.Len(t, parts, 2)

	p = b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=100&partitions=3")
	require.Equal(t, 1, p.PartitionsClaimed, "the other two are leased")
	require.Len(t, p.Messages, 3)
}

func TestPopFindsTheBusyPartitionAmongManyIdleOnes(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	wide := b.Q("wide")
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": wide})
	b.AddPartitions(t, wide, 5000)
	b.Push(t, brokertest.Numbered(wide, "busy", 0, 3)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+wide+"?batch=10")
	require.Equal(t, "busy", p.Partition)
	require.Equal(t, []int{0, 1, 2}, p.Ns())
}

func TestAutoAckMovesTheCursorInTheSameTransaction(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 3)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2&autoAck=true")
	require.Equal(t, "", p.LeaseID)
	require.Equal(t, "", p.Messages[0].LeaseID)
	c := b.Cursor(t, q)
	require.EqualValues(t, 2, c.Committed)
	require.Nil(t, c.LeaseID)
	require.EqualValues(t, 2, c.TotalConsumed)
	require.Equal(t, []int{2}, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2&autoAck=1").Ns())
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?autoAck=true"))
}

func TestConsumerGroupsEachSeeEveryMessage(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 4)...)
	for _, g := range []string{"g1", "g2", ""} {
		p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&consumerGroup="+g)
		require.Equal(t, seq(0, 4), p.Ns(), "group %q", g)
		if g != "" {
			require.Equal(t, g, p.ConsumerGroup)
		}
	}
}

func TestSubscriptionAllStartsAtTheBeginning(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 2)...)
	require.Equal(t, []int{0, 1}, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&consumerGroup=g&subscriptionMode=all").Ns())
}

func TestAnySubscriptionModeButNewMeansAll(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	qQ := b.Q("q")
	b.Push(t, brokertest.Numbered(qQ, "Default", 0, 2)...)
	for i, q := range []string{"subscriptionMode=from_beginning", "subscriptionMode=", "subscriptionMode=old",
		"subscriptionMode=ALL", "subscriptionMode=new&subscriptionFrom=yesterday", "subscriptionFrom=yesterday"} {
		got := b.Pop(t, fmt.Sprintf("/api/v1/pop/queue/"+qQ+"?batch=10&autoAck=true&consumerGroup=g%d&%s", i, q))
		require.NotNil(t, got, q)
		require.Equal(t, []int{0, 1}, got.Ns(), q)
	}
}

func TestSubscriptionNewStartsAtTheGroupsFirstPopForEveryPartition(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"subscriptionMode=new", "subscriptionMode=new-only", "subscriptionFrom=now"} {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			b := brokertest.Shared(t)
			qQ := b.Q("q")
			b.Push(t, brokertest.Numbered(qQ, "a", 0, 2)...)
			b.Push(t, brokertest.Numbered(qQ, "b", 0, 2)...)
			require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+qQ+"?batch=10&consumerGroup=g&"+q))
			b.Push(t, brokertest.Numbered(qQ, "a", 10, 1)...)
			b.Push(t, brokertest.Numbered(qQ, "b", 20, 1)...)
			// Later pops of the group keep the remembered start, whatever they say.
			got := append(b.Pop(t, "/api/v1/pop/queue/"+qQ+"?batch=10&consumerGroup=g").Ns(),
				b.Pop(t, "/api/v1/pop/queue/"+qQ+"?batch=10&consumerGroup=g&subscriptionMode=all").Ns()...)
			require.ElementsMatch(t, []int{10, 20}, got)
		})
	}
}

func TestSubscriptionFromTimestampStartsStrictlyAfterIt(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 2)...)
	b.Age(t, q, time.Second) // the later pushes are stamped later, whatever the clock's grain
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&consumerGroup=probe")
	from := p.Messages[1].CreatedAt // the first push's time, exactly
	b.Push(t, brokertest.Numbered(q, "Default", 2, 1)...)
	b.Push(t, brokertest.Numbered(q, "Default", 3, 2)...)
	p = b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&consumerGroup=g&subscriptionFrom="+from)
	require.Equal(t, []int{2, 3, 4}, p.Ns())
}

func TestDelayedProcessingHoldsYoungMessages(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q, "options": map[string]any{"delayedProcessing": 1}})
	b.Push(t, brokertest.Numbered(q, "Default", 0, 2)...)
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10"))
	start := time.Now()
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&wait=true&timeout=5000")
	require.Equal(t, []int{0, 1}, p.Ns())
	require.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond)
}

func TestPopSkipsRetentionGaps(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	for i := 0; i < 3; i++ {
		b.Push(t, brokertest.Numbered(q, "Default", i*2, 2)...)
	}
	b.DropSegment(t, q, 2)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=3")
	require.Equal(t, []int{0, 1, 4}, p.Ns())
	ackLast(t, b, p, "")
	p = b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=3")
	require.Equal(t, []int{5}, p.Ns(), "a batch starting inside a segment keeps its tail")
	ackLast(t, b, p, "")
	b.Push(t, brokertest.Numbered(q, "Default", 6, 1)...)
	b.DropSegment(t, q, 6)
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q))
	require.EqualValues(t, 7, b.Cursor(t, q).Committed)
}

func TestPopOnOneReplicaSeesPushesOnAnother(t *testing.T) {
	t.Parallel()
	a := brokertest.Shared(t)
	b := a.Replica(t)
	q := a.Q("q")
	a.Push(t, brokertest.Numbered(q, "x", 0, 1)...)
	require.Equal(t, []int{0}, b.Pop(t, "/api/v1/pop/queue/"+q).Ns())
	a.Push(t, brokertest.Numbered(q, "y", 1, 1)...)
	// b's hot list is seeded; the new partition reaches it by NOTIFY.
	brokertest.Eventually(t, 10*time.Second, func() error {
		if got := b.Pop(t, "/api/v1/pop/queue/"+q).Ns(); got != nil {
			require.Equal(t, []int{1}, got)
			return nil
		}
		return errors.New("b never saw the push on a")
	})
}
