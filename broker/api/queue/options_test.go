package queue_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

// The queue options of queue-admin-api.md §8 that the pop and push paths
// enforce, or must not: one test each. Retention and eviction are
// broker/domain/retention's.

func configureQueue(t *testing.T, b *brokertest.Broker, queue string, options map[string]any) map[string]any {
	t.Helper()
	resp := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": queue, "options": options})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	return resp.Map(t)["options"].(map[string]any)
}

func TestWindowBufferHoldsAPartitionWhileItsNewestMessageIsYounger(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	configureQueue(t, b, q, map[string]any{"windowBuffer": 60})
	b.Push(t, brokertest.Numbered(q, "held", 0, 2)...)
	b.Push(t, brokertest.Numbered(q, "quiet", 10, 1)...)
	b.Quiet(t, q, "quiet", 2*time.Minute)

	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/held?batch=10"), "the partition route answers 204")
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&partitions=10")
	require.Equal(t, []int{10}, p.Ns(), "the queue-wide pop claims only the quiet partition")
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&partitions=10"))
	for _, c := range b.Cursors(t, q) {
		require.False(t, c.Partition == "held" && c.LeaseID != nil, "a held partition takes no lease")
	}

	b.Quiet(t, q, "held", 2*time.Minute)
	b.Push(t, brokertest.Numbered(q, "held", 2, 1)...)
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/held?batch=10"), "a new push holds it again")
	b.Quiet(t, q, "held", 2*time.Minute)
	require.Equal(t, []int{0, 1, 2}, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/held?batch=10").Ns(),
		"once quiet, everything after the cursor is delivered")
}

func TestAParkedLongPollWakesWhenAHeldPartitionsWindowEnds(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	configureQueue(t, b, q, map[string]any{"windowBuffer": 1})
	b.Push(t, brokertest.Numbered(q, "Default", 0, 2)...)
	for _, path := range []string{"/api/v1/pop/queue/" + q, "/api/v1/pop/queue/" + q + "/partition/Default"} {
		b.Quiet(t, q, "Default", -500*time.Millisecond) // newest message 0.5 s in the future: 1.5 s to wait
		start := time.Now()
		p := b.Pop(t, path+"?batch=10&autoAck=true&consumerGroup="+time.Now().Format("150405.000000")+"&wait=true&timeout=8000")
		took := time.Since(start)
		require.Equal(t, []int{0, 1}, p.Ns(), path)
		require.GreaterOrEqual(t, took, time.Second, path)
		require.Less(t, took, 5*time.Second, "%s: woken by the window's end, not the timeout", path)
	}
}

func TestWindowBufferAndDelayedProcessingMustBothPass(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	configureQueue(t, b, q, map[string]any{"windowBuffer": 60, "delayedProcessing": 60})
	b.Push(t, brokertest.Numbered(q, "Default", 0, 1)...)
	b.Quiet(t, q, "Default", 2*time.Minute)
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/Default"), "the window passed, the delay did not")
	b.Age(t, q, 2*time.Minute)
	b.Quiet(t, q, "Default", 0)
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/Default"), "the delay passed, the window did not")
	b.Quiet(t, q, "Default", 2*time.Minute)
	require.Equal(t, []int{0}, b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/Default").Ns())
}

func TestTTLIsStoredAndEchoedAndExpiresNothing(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	require.Equal(t, 1.0, configureQueue(t, b, q, map[string]any{"ttl": 1})["ttl"])
	b.Push(t, brokertest.Numbered(q, "Default", 0, 1)...)
	b.Age(t, q, 24*time.Hour)
	require.Equal(t, []int{0}, b.Pop(t, "/api/v1/pop/queue/"+q).Ns(), "a day past its ttl, the message is delivered")
}

func TestMaxSizeIsStoredAndEchoedAndNotEnforcedOnPush(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	require.Equal(t, 2.0, configureQueue(t, b, q, map[string]any{"maxSize": 2})["maxSize"])
	out := b.Push(t, brokertest.Numbered(q, "Default", 0, 5)...)
	for _, o := range out {
		require.Equal(t, "queued", o["status"])
	}
	resp := b.Do(t, "POST", "/api/v1/transaction", "", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": brokertest.Numbered(q, "Default", 5, 2)}}})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.Equal(t, seq(0, 7), b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10").Ns())
}

func TestPriorityIsStoredAndEchoedAndNoPopReadsIt(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	require.Equal(t, 9.0, configureQueue(t, b, q, map[string]any{"priority": 9})["priority"])
	require.Equal(t, 9, b.Stored(t, q).Priority)
	b.Push(t, brokertest.Numbered(q, "Default", 0, 3)...)
	require.Equal(t, seq(0, 3), b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10").Ns(), "delivered as without it")
}

func TestDeadLetteringHappensWhateverDeadLetterQueueAndDlqAfterMaxRetriesSay(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	o := configureQueue(t, b, q, map[string]any{"retryLimit": 0, "deadLetterQueue": false, "dlqAfterMaxRetries": false})
	require.Equal(t, false, o["deadLetterQueue"])
	require.Equal(t, false, o["dlqAfterMaxRetries"])
	o = configureQueue(t, b, b.Q("echo"), map[string]any{"deadLetterQueue": true, "dlqAfterMaxRetries": true})
	require.Equal(t, true, o["deadLetterQueue"])
	require.Equal(t, true, o["dlqAfterMaxRetries"])

	b.Push(t, brokertest.Numbered(q, "Default", 0, 1)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q)
	m := p.Messages[0]
	ack(t, b, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": p.LeaseID,
		"status": "failed"})
	require.Equal(t, 1, b.Stored(t, q).DeadLetters, "both flags false, and still a dead letter")
}

func TestDeletingAQueueDeletesItsSubscriptionRecords(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 1)...)
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?consumerGroup=g&subscriptionMode=new"))
	stored := b.Stored(t, q)
	require.Equal(t, 1, stored.Subscriptions)
	resp := b.Do(t, "DELETE", "/api/v1/resources/queues/"+q, "", nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.Empty(t, b.Leftovers(t, stored.ID, stored.Partitions["Default"]))

	// The name reused: the group starts afresh, from the beginning.
	b.Push(t, brokertest.Numbered(q, "Default", 1, 2)...)
	require.Equal(t, []int{1, 2}, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&consumerGroup=g").Ns())
}

func TestDefaultSubscriptionModeAppliesToAPopThatSendsNone(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *config.Config) { c.DefaultSubscriptionMode = "new" })
	b.Push(t, brokertest.Numbered("q", "Default", 0, 2)...)
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/q?consumerGroup=g"), "g starts at its first pop")
	require.Equal(t, []int{0, 1}, b.Pop(t, "/api/v1/pop/queue/q?batch=10&consumerGroup=h&subscriptionMode=all").Ns(),
		"a mode sent wins")
	b.Push(t, brokertest.Numbered("q", "Default", 2, 1)...)
	require.Equal(t, []int{2}, b.Pop(t, "/api/v1/pop/queue/q?batch=10&consumerGroup=g").Ns())
}
