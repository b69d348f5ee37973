package queue_test

import (
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

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
	ID            string  `json:"id"`
	TransactionID string  `json:"transactionId"`
	TraceID       *string `json:"traceId"`
	Data          any     `json:"data"`
	ProducerSub   *string `json:"producerSub"`
	CreatedAt     string  `json:"createdAt"`
	PartitionID   string  `json:"partitionId"`
	Partition     string  `json:"partition"`
	LeaseID       string  `json:"leaseId"`
	ConsumerGroup string  `json:"consumerGroup"`
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

// ns returns the "n" of each popped payload.
func ns(p *popped) []int {
	if p == nil {
		return nil
	}
	var out []int
	for _, m := range p.Messages {
		out = append(out, int(m.Data.(map[string]any)["n"].(float64)))
	}
	return out
}

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
func ackLast(t *testing.T, b *brokertest.Broker, p *popped, group string) map[string]any {
	t.Helper()
	m := p.Messages[len(p.Messages)-1]
	return ack(t, b, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
		"leaseId": p.LeaseID, "consumerGroup": group})
}

func TestPopEmptyIs204WithNoBody(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	require.Nil(t, pop(t, b, "/api/v1/pop/queue/nothing"))
	push(t, b, msgs("q", "Default", 0, 1)...)
	require.NotNil(t, pop(t, b, "/api/v1/pop/queue/q"))
	require.Nil(t, pop(t, b, "/api/v1/pop/queue/q"), "the only message is leased")
	require.Nil(t, pop(t, b, "/api/v1/pop/queue/q/partition/other"))
}

func TestPopAnswersEveryFieldWithDataAsPayloadKey(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	trace := "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
	out := push(t, b, map[string]any{"queue": "q", "partition": "p1", "payload": map[string]any{"k": "v"},
		"transactionId": "tx-1", "traceId": trace, "producerSub": "ignored"})
	resp := b.Do(t, "GET", "/api/v1/pop/queue/q", "", nil)
	require.Equal(t, http.StatusOK, resp.Status)
	m := resp.Map(t)
	require.Equal(t, true, m["success"])
	require.Equal(t, "q", m["queue"])
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
	b := brokertest.Start(t)
	before := time.Now().UTC()
	push(t, b, msgs("q", "Default", 0, 1)...)
	p := pop(t, b, "/api/v1/pop/queue/q")
	require.Regexp(t, regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`), p.Messages[0].CreatedAt)
	at, err := time.Parse(time.RFC3339Nano, p.Messages[0].CreatedAt)
	require.NoError(t, err)
	require.WithinDuration(t, before, at, 5*time.Second)
}

func TestPopPayloadNullAndDataAlias(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	push(t, b,
		map[string]any{"queue": "q", "payload": nil},
		map[string]any{"queue": "q", "data": []any{1, "two"}},
		map[string]any{"queue": "q"},
	)
	p := pop(t, b, "/api/v1/pop/queue/q?batch=3")
	require.Nil(t, p.Messages[0].Data)
	require.Equal(t, []any{1.0, "two"}, p.Messages[1].Data)
	require.Nil(t, p.Messages[2].Data)
}

func TestPopBatchDefaultsToOne(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	push(t, b, msgs("q", "Default", 0, 3)...)
	require.Equal(t, []int{0}, ns(pop(t, b, "/api/v1/pop/queue/q")))
}

func TestOrderWithinPartitionIsPushOrderAcrossSegmentsAndRequests(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	for i := 0; i < 5; i++ {
		push(t, b, msgs("q", "Default", i*7, 7)...)
	}
	var got []int
	for {
		p := pop(t, b, "/api/v1/pop/queue/q?batch=4")
		if p == nil {
			break
		}
		got = append(got, ns(p)...)
		ackLast(t, b, p, "")
	}
	require.Equal(t, seq(0, 35), got)
}

func TestPopPartitionRouteClaimsThatPartitionOnly(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	push(t, b, msgs("q", "a", 0, 2)...)
	push(t, b, msgs("q", "b", 100, 2)...)
	p := pop(t, b, "/api/v1/pop/queue/q/partition/b?batch=10")
	require.Equal(t, "b", p.Partition)
	require.Equal(t, []int{100, 101}, ns(p))
}

func TestPopPartitionsShareTheBatchBudget(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	for _, part := range []string{"a", "b", "c"} {
		push(t, b, msgs("q", part, 0, 3)...)
	}
	p := pop(t, b, "/api/v1/pop/queue/q?batch=5&partitions=3")
	require.Equal(t, 2, p.PartitionsClaimed)
	require.Len(t, p.Messages, 5)
	parts := map[string]int{}
	for _, m := range p.Messages {
		parts[m.Partition]++
		require.Equal(t, p.LeaseID, m.LeaseID, "one lease per pop request")
	}
	require.Len(t, parts, 2)

	p = pop(t, b, "/api/v1/pop/queue/q?batch=100&partitions=3")
	require.Equal(t, 1, p.PartitionsClaimed, "the other two are leased")
	require.Len(t, p.Messages, 3)
}

func TestPopFindsTheBusyPartitionAmongManyIdleOnes(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	_, err := b.Pool.Exec(t.Context(), `INSERT INTO queen.queues (id, name) VALUES (gen_random_uuid(), 'wide');
		INSERT INTO queen.partitions (id, queue_id, name)
		SELECT gen_random_uuid(), q.id, 'idle-' || i FROM queen.queues q, generate_series(1, 5000) i`)
	require.NoError(t, err)
	push(t, b, msgs("wide", "busy", 0, 3)...)
	p := pop(t, b, "/api/v1/pop/queue/wide?batch=10")
	require.Equal(t, "busy", p.Partition)
	require.Equal(t, []int{0, 1, 2}, ns(p))
}

func TestAutoAckMovesTheCursorInTheSameTransaction(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	push(t, b, msgs("q", "Default", 0, 3)...)
	p := pop(t, b, "/api/v1/pop/queue/q?batch=2&autoAck=true")
	require.Equal(t, "", p.LeaseID)
	require.Equal(t, "", p.Messages[0].LeaseID)
	require.Equal(t, 1, b.Count(t, `SELECT count(*) FROM queen.cursors WHERE committed = 2 AND lease_id IS NULL AND total_consumed = 2`))
	require.Equal(t, []int{2}, ns(pop(t, b, "/api/v1/pop/queue/q?batch=2&autoAck=1")))
	require.Nil(t, pop(t, b, "/api/v1/pop/queue/q?autoAck=true"))
}

func TestConsumerGroupsEachSeeEveryMessage(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	push(t, b, msgs("q", "Default", 0, 4)...)
	for _, g := range []string{"g1", "g2", ""} {
		p := pop(t, b, "/api/v1/pop/queue/q?batch=10&consumerGroup="+g)
		require.Equal(t, seq(0, 4), ns(p), "group %q", g)
		if g != "" {
			require.Equal(t, g, p.ConsumerGroup)
		}
	}
}

func TestSubscriptionAllStartsAtTheBeginning(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	push(t, b, msgs("q", "Default", 0, 2)...)
	require.Equal(t, []int{0, 1}, ns(pop(t, b, "/api/v1/pop/queue/q?batch=10&consumerGroup=g&subscriptionMode=all")))
}

func TestAnySubscriptionModeButNewMeansAll(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	push(t, b, msgs("q", "Default", 0, 2)...)
	for i, q := range []string{"subscriptionMode=from_beginning", "subscriptionMode=", "subscriptionMode=old",
		"subscriptionMode=ALL", "subscriptionMode=new&subscriptionFrom=yesterday", "subscriptionFrom=yesterday"} {
		got := pop(t, b, fmt.Sprintf("/api/v1/pop/queue/q?batch=10&autoAck=true&consumerGroup=g%d&%s", i, q))
		require.NotNil(t, got, q)
		require.Equal(t, []int{0, 1}, ns(got), q)
	}
}

func TestSubscriptionNewStartsAtTheGroupsFirstPopForEveryPartition(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"subscriptionMode=new", "subscriptionMode=new-only", "subscriptionFrom=now"} {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			b := brokertest.Start(t)
			push(t, b, msgs("q", "a", 0, 2)...)
			push(t, b, msgs("q", "b", 0, 2)...)
			require.Nil(t, pop(t, b, "/api/v1/pop/queue/q?batch=10&consumerGroup=g&"+q))
			push(t, b, msgs("q", "a", 10, 1)...)
			push(t, b, msgs("q", "b", 20, 1)...)
			// Later pops of the group keep the remembered start, whatever they say.
			got := append(ns(pop(t, b, "/api/v1/pop/queue/q?batch=10&consumerGroup=g")),
				ns(pop(t, b, "/api/v1/pop/queue/q?batch=10&consumerGroup=g&subscriptionMode=all"))...)
			require.ElementsMatch(t, []int{10, 20}, got)
		})
	}
}

func TestSubscriptionFromTimestampStartsStrictlyAfterIt(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	push(t, b, msgs("q", "Default", 0, 2)...)
	p := pop(t, b, "/api/v1/pop/queue/q?batch=10&consumerGroup=probe")
	from := p.Messages[1].CreatedAt // the second push's time, exactly
	push(t, b, msgs("q", "Default", 2, 1)...)
	time.Sleep(2 * time.Millisecond)
	push(t, b, msgs("q", "Default", 3, 2)...)
	p = pop(t, b, "/api/v1/pop/queue/q?batch=10&consumerGroup=g&subscriptionFrom="+from)
	require.Equal(t, []int{2, 3, 4}, ns(p))
}

func TestDelayedProcessingHoldsYoungMessages(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": "q", "options": map[string]any{"delayedProcessing": 1}})
	push(t, b, msgs("q", "Default", 0, 2)...)
	require.Nil(t, pop(t, b, "/api/v1/pop/queue/q?batch=10"))
	start := time.Now()
	p := pop(t, b, "/api/v1/pop/queue/q?batch=10&wait=true&timeout=5000")
	require.Equal(t, []int{0, 1}, ns(p))
	require.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond)
}

func TestPopSkipsRetentionGaps(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	for i := 0; i < 3; i++ {
		push(t, b, msgs("q", "Default", i*2, 2)...)
	}
	_, err := b.Pool.Exec(t.Context(), `DELETE FROM queen.log_segments WHERE base_offset = 2`)
	require.NoError(t, err)
	p := pop(t, b, "/api/v1/pop/queue/q?batch=3")
	require.Equal(t, []int{0, 1, 4}, ns(p))
	ackLast(t, b, p, "")
	p = pop(t, b, "/api/v1/pop/queue/q?batch=3")
	require.Equal(t, []int{5}, ns(p), "a batch starting inside a segment keeps its tail")
	ackLast(t, b, p, "")
	push(t, b, msgs("q", "Default", 6, 1)...)
	_, err = b.Pool.Exec(t.Context(), `DELETE FROM queen.log_segments WHERE base_offset = 6`)
	require.NoError(t, err)
	require.Nil(t, pop(t, b, "/api/v1/pop/queue/q"))
	require.Equal(t, 1, b.Count(t, `SELECT count(*) FROM queen.cursors WHERE committed = 7`))
}

func TestPopOnOneReplicaSeesPushesOnAnother(t *testing.T) {
	t.Parallel()
	a := brokertest.Start(t)
	b := brokertest.StartOn(t, a.DatabaseURL)
	push(t, a, msgs("q", "x", 0, 1)...)
	require.Equal(t, []int{0}, ns(pop(t, b, "/api/v1/pop/queue/q")))
	push(t, a, msgs("q", "y", 1, 1)...)
	// b's hot list is seeded; the new partition reaches it by NOTIFY.
	var got []int
	for i := 0; i < 50 && got == nil; i++ {
		got = ns(pop(t, b, "/api/v1/pop/queue/q"))
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, []int{1}, got)
}
