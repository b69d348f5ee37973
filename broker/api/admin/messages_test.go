package admin_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/test/brokertest"
)

// pushTx pushes one message per transaction id to queue/partition, payload
// {"n": i}, in one request, and returns the partition's id.
func pushTx(t *testing.T, b *brokertest.Broker, queue, partition string, txids ...string) string {
	t.Helper()
	items := make([]map[string]any, len(txids))
	for i, tx := range txids {
		items[i] = map[string]any{"queue": queue, "partition": partition, "transactionId": tx, "payload": map[string]any{"n": i}}
	}
	return b.Push(t, items...)[0]["partition_id"].(string)
}

type listing struct {
	Messages []map[string]any `json:"messages"`
	Mode     map[string]any   `json:"mode"`
}

func list(t *testing.T, b *brokertest.Broker, query string) listing {
	t.Helper()
	var l listing
	b.Call(t, http.StatusOK, "GET", "/api/v1/messages?"+query, nil).JSON(t, &l)
	return l
}

func txids(ms []map[string]any) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m["transactionId"].(string))
	}
	return out
}

func TestMessagesListsTheLastHourNewestFirstWithEveryFieldAndNoPayload(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "orders", "namespace": "shop", "task": "bill",
		"options": map[string]any{"priority": 7}})
	pushTx(t, b, "orders", "p1", "a")
	pushTx(t, b, "orders", "p2", "b")
	pushTx(t, b, "orders", "p1", "c")

	l := list(t, b, "")
	require.Equal(t, []string{"c", "b", "a"}, txids(l.Messages))
	m := l.Messages[0]
	for _, k := range []string{"id", "transactionId", "partitionId", "queuePath", "queue", "partition", "namespace", "task",
		"status", "queueStatus", "busStatus", "traceId", "producerSub", "queuePriority", "createdAt", "leaseExpiresAt"} {
		require.Contains(t, m, k)
	}
	require.NotContains(t, m, "payload")
	require.NotContains(t, m, "data")
	require.Equal(t, "orders/p1", m["queuePath"])
	require.Equal(t, "shop", m["namespace"])
	require.Equal(t, "bill", m["task"])
	require.EqualValues(t, 7, m["queuePriority"])
	require.Equal(t, map[string]any{"consumedBy": 0.0, "totalGroups": 0.0}, m["busStatus"])
	require.Equal(t, map[string]any{"hasQueueMode": false, "busGroupsCount": 0.0, "type": "none"}, l.Mode)
}

func TestMessagesFilterByQueuePartitionNamespaceAndTask(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "q1", "namespace": "n1", "task": "t1"})
	pushTx(t, b, "q1", "a", "1a")
	pushTx(t, b, "q1", "b", "1b")
	pushTx(t, b, "q2", "a", "2a")
	require.Equal(t, []string{"2a", "1b", "1a"}, txids(list(t, b, "").Messages))
	require.Equal(t, []string{"1b", "1a"}, txids(list(t, b, "queue=q1").Messages))
	require.Equal(t, []string{"2a", "1a"}, txids(list(t, b, "partition=a").Messages))
	require.Equal(t, []string{"1b", "1a"}, txids(list(t, b, "ns=n1").Messages))
	require.Equal(t, []string{"1b", "1a"}, txids(list(t, b, "task=t1&consumerGroup=ignored").Messages))
	require.Empty(t, list(t, b, "queue=q1&task=other").Messages)
}

func TestMessagesOutsideTheWindowAreNotListed(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pushTx(t, b, "q", "p", "x")
	later := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	require.Empty(t, list(t, b, "from="+later).Messages)
	earlier := url.QueryEscape(time.Now().Add(-2 * time.Hour).Format(time.RFC3339))
	require.Empty(t, list(t, b, "from="+earlier+"&to="+url.QueryEscape(time.Now().Add(-90*time.Minute).Format(time.RFC3339))).Messages)
	require.Equal(t, []string{"x"}, txids(list(t, b, "from="+earlier).Messages))
}

func TestMessagesWithAnUnparsableFromOrToAre400(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	for _, q := range []string{"from=yesterday", "to=2026-13-01T00:00:00Z", "from=1"} {
		r := b.Call(t, http.StatusBadRequest, "GET", "/api/v1/messages?"+q, nil)
		require.NotEmpty(t, r.Map(t)["error"], q)
	}
	r := b.Call(t, http.StatusBadRequest, "GET", "/api/v1/messages?queue=a%00b", nil)
	require.NotEmpty(t, r.Map(t)["error"])
}

func TestMessagesPageWithLimitAndOffsetAndABadIntegerIsTheDefault(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	var all []string
	for i := range 5 {
		tx := fmt.Sprint("m", i)
		pushTx(t, b, "q", "p", tx) // one segment each
		all = append([]string{tx}, all...)
	}
	require.Equal(t, all[1:3], txids(list(t, b, "limit=2&offset=1").Messages))
	require.Equal(t, all, txids(list(t, b, "limit=x&offset=-3").Messages))
}

func TestMessagesListingReadsPastAChunkOfSegments(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	// 40 partitions of one segment each: more than one chunk of 32.
	for i := range 40 {
		pushTx(t, b, "q", fmt.Sprint("p", i), fmt.Sprint("t", i))
	}
	l := list(t, b, "limit=1000")
	require.Len(t, l.Messages, 40)
	require.Equal(t, "t39", l.Messages[0]["transactionId"])
	require.Equal(t, "t0", l.Messages[39]["transactionId"])
	require.Equal(t, []string{"t5"}, txids(list(t, b, "limit=1&offset=34").Messages))
}

func TestMessageStatusComesFromTheQueueModeCursorAndDeadLetters(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pushTx(t, b, "q", "p", "done", "dead", "leased", "waiting")
	p := b.Pop(t, "/api/v1/pop/queue/q?batch=1")
	b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": "done", "partitionId": p.PartitionID, "leaseId": p.LeaseID})
	p = b.Pop(t, "/api/v1/pop/queue/q?batch=1")
	b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": "dead", "partitionId": p.PartitionID,
		"leaseId": p.LeaseID, "status": "dlq", "error": "poison"})
	b.Pop(t, "/api/v1/pop/queue/q?batch=1")

	l := list(t, b, "")
	got := map[string]string{}
	for _, m := range l.Messages {
		got[m["transactionId"].(string)] = m["status"].(string)
		require.Equal(t, m["status"], m["queueStatus"])
		if m["transactionId"] == "leased" {
			require.NotNil(t, m["leaseExpiresAt"])
		}
	}
	require.Equal(t, map[string]string{"done": "completed", "dead": "dead_letter", "leased": "processing", "waiting": "pending"}, got)
	require.Equal(t, map[string]any{"hasQueueMode": true, "busGroupsCount": 0.0, "type": "queue"}, l.Mode)
	require.Equal(t, []string{"leased"}, txids(list(t, b, "status=processing").Messages))
	require.Equal(t, []string{"dead"}, txids(list(t, b, "status=dead_letter").Messages))
	require.Empty(t, list(t, b, "status=failed").Messages, "the CLI's failed matches nothing")
}

func TestMessageStatusWithNamedGroupsIsCompletedOnlyWhenEveryGroupIsPast(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	pushTx(t, b, q, "p", "first", "second")
	b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=2&autoAck=true&consumerGroup=fast")
	b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=1&autoAck=true&consumerGroup=slow")

	l := list(t, b, "queue="+q)
	require.Equal(t, map[string]any{"hasQueueMode": false, "busGroupsCount": 2.0, "type": "bus"}, l.Mode)
	byTx := map[string]map[string]any{}
	for _, m := range l.Messages {
		byTx[m["transactionId"].(string)] = m
		require.Equal(t, "pending", m["queueStatus"], "no queue-mode cursor")
	}
	require.Equal(t, "completed", byTx["first"]["status"])
	require.Equal(t, map[string]any{"consumedBy": 2.0, "totalGroups": 2.0}, byTx["first"]["busStatus"])
	require.Equal(t, "pending", byTx["second"]["status"])
	require.Equal(t, map[string]any{"consumedBy": 1.0, "totalGroups": 2.0}, byTx["second"]["busStatus"])

	b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=1")
	require.Equal(t, "hybrid", list(t, b, "queue="+q).Mode["type"])
}

func TestMessageDetailHasThePayloadTheQueueConfigAndEveryCursor(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q,
		"options": map[string]any{"leaseTime": 60, "retryLimit": 2, "retryDelay": 500, "ttl": 99, "priority": 3}})
	pushTx(t, b, q, "p", "x")
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=1&consumerGroup=g&autoAck=true")
	b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=1")

	m := b.Call(t, http.StatusOK, "GET", "/api/v1/messages/"+p.PartitionID+"/x", nil).Map(t)
	require.Equal(t, map[string]any{"n": 0.0}, m["payload"])
	require.Equal(t, false, m["isEncrypted"])
	require.Equal(t, "processing", m["status"])
	require.Equal(t, q, m["queue"])
	require.Equal(t, "p", m["partition"])
	require.Nil(t, m["errorMessage"])
	require.Nil(t, m["retryCount"])
	require.NotNil(t, m["leaseExpiresAt"])
	require.Equal(t, map[string]any{"leaseTime": 60.0, "retryLimit": 2.0, "retryDelay": 500.0, "ttl": 99.0, "priority": 3.0}, m["queueConfig"])
	require.Equal(t, map[string]any{"hasQueueMode": true, "busGroupsCount": 1.0, "consumedByGroups": 1.0, "type": "hybrid"}, m["mode"])
	groups := m["consumerGroups"].([]any)
	require.Len(t, groups, 2)
	require.Equal(t, "__QUEUE_MODE__", groups[0].(map[string]any)["name"])
	require.Equal(t, false, groups[0].(map[string]any)["consumed"])
	require.NotNil(t, groups[0].(map[string]any)["leaseExpiresAt"])
	require.Equal(t, map[string]any{"name": "g", "consumed": true, "leaseExpiresAt": nil}, groups[1])
	for _, k := range []string{"queueStatus", "busStatus", "queuePriority"} {
		require.NotContains(t, m, k)
	}
}

func TestMessageDetailOfADeadLetterCarriesItsErrorAndRetryCount(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	pushTx(t, b, q, "p", "x")
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=1")
	b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": "x", "partitionId": p.PartitionID,
		"leaseId": p.LeaseID, "status": "dlq", "error": "poison"})
	m := b.Call(t, http.StatusOK, "GET", "/api/v1/messages/"+p.PartitionID+"/x", nil).Map(t)
	require.Equal(t, "dead_letter", m["status"])
	require.Equal(t, "poison", m["errorMessage"])
	require.NotNil(t, m["retryCount"])
}

func TestMessageDetailOpensASealedPayload(t *testing.T) {
	t.Parallel()
	key, _ := brokertest.KeyFile(t)
	b := start(t, func(c *config.Config) { c.EncryptionKey = key }) // the shared broker has no key
	b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "q", "options": map[string]any{"encryptionEnabled": true}})
	pushTx(t, b, "q", "p", "x")
	pid := partitionID(t, b, "q", "p")
	m := b.Call(t, http.StatusOK, "GET", "/api/v1/messages/"+pid+"/x", nil).Map(t)
	require.Equal(t, true, m["isEncrypted"])
	require.Equal(t, map[string]any{"n": 0.0}, m["payload"])
}

func partitionID(t *testing.T, b *brokertest.Broker, queue, partition string) string {
	t.Helper()
	id, ok := b.Stored(t, queue).Partitions[partition]
	require.True(t, ok, "no partition %s of %s", partition, queue)
	return id
}

func TestAnUnknownMessageOrAPartitionIdThatIsNotAUUIDIs404(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pushTx(t, b, "q", "p", "x")
	pid := partitionID(t, b, "q", "p")
	for _, path := range []string{pid + "/nope", "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f/x", "not-a-uuid/x", pid + "/a%00b"} {
		r := b.Call(t, http.StatusNotFound, "GET", "/api/v1/messages/"+path, nil)
		require.JSONEq(t, `{"error": "Message not found"}`, string(r.Body), path)
	}
	r := b.Call(t, http.StatusNotFound, "GET", "/api/v1/messages/x", nil)
	require.JSONEq(t, `{"error": "Not found"}`, string(r.Body), "the older one-segment route is not served")
}

func TestStatusQueueMessagesIsABareArrayNewestFirstWithQueueModeStatuses(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	nope := b.Q("nope")
	q := b.Q("q")
	pushTx(t, b, q, "p", "a", "b")
	pushTx(t, b, q, "r", "c")
	b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/p?batch=1&autoAck=true")
	got := array(t, b.Call(t, http.StatusOK, "GET", "/api/v1/status/queues/"+q+"/messages", nil))
	require.Equal(t, []string{"c", "b", "a"}, txids(got))
	require.Equal(t, "completed", got[2]["status"])
	require.Equal(t, "pending", got[1]["status"])
	require.Len(t, got[0], 8, "id, transactionId, partitionId, queuePath, queue, partition, status, createdAt")
	require.Equal(t, []string{"b"}, txids(array(t, b.Call(t, http.StatusOK, "GET", "/api/v1/status/queues/"+q+"/messages?limit=1&offset=1", nil))))
	require.JSONEq(t, `[]`, string(b.Call(t, http.StatusOK, "GET", "/api/v1/status/queues/"+nope+"/messages", nil).Body))
}

func deleteMessage(t *testing.T, b *brokertest.Broker, pid, tx string) map[string]any {
	t.Helper()
	return b.Call(t, http.StatusOK, "DELETE", "/api/v1/messages/"+pid+"/"+tx, nil).Map(t)
}

func TestADeletedMessageIsGoneFromLookupsListingsAndPops(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pushTx(t, b, "q", "p", "a", "b", "c")
	pid := partitionID(t, b, "q", "p")
	require.Equal(t, map[string]any{"success": true, "partitionId": pid, "transactionId": "b",
		"message": "Message deleted successfully"}, deleteMessage(t, b, pid, "b"))

	b.Call(t, http.StatusNotFound, "GET", "/api/v1/messages/"+pid+"/b", nil)
	b.Call(t, http.StatusOK, "GET", "/api/v1/messages/"+pid+"/c", nil)
	require.Equal(t, []string{"c", "a"}, txids(list(t, b, "").Messages))
	ns := b.Pop(t, "/api/v1/pop/queue/q?batch=10&autoAck=true").Ns()
	require.Equal(t, []int{0, 2}, ns)
	ns = b.Pop(t, "/api/v1/pop/queue/q?batch=10&autoAck=true&consumerGroup=late").Ns()
	require.Equal(t, []int{0, 2}, ns, "no group ever gets it")
	for _, f := range b.Frames(t, b.Tenant, "q") {
		if f.Deleted() {
			require.Empty(t, f.Payload, "the payload is gone from storage, not only hidden")
		}
	}
}

func TestDeletingAMessageRemovesItsDeadLettersAndFreesItsTransactionId(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pushTx(t, b, "q", "p", "x")
	p := b.Pop(t, "/api/v1/pop/queue/q?batch=1")
	b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": "x", "partitionId": p.PartitionID,
		"leaseId": p.LeaseID, "status": "dlq"})
	require.EqualValues(t, 1, b.Call(t, http.StatusOK, "GET", "/api/v1/dlq", nil).Map(t)["total"])

	require.Equal(t, true, deleteMessage(t, b, p.PartitionID, "x")["success"])
	require.EqualValues(t, 0, b.Call(t, http.StatusOK, "GET", "/api/v1/dlq", nil).Map(t)["total"], "CLI dlq drain")
	r := b.Call(t, http.StatusCreated, "POST", "/api/v1/push", map[string]any{"items": []any{
		map[string]any{"queue": "q", "partition": "p", "transactionId": "x", "payload": map[string]any{"n": 9}}}})
	require.Contains(t, string(r.Body), `"status":"queued"`, "not a duplicate of the deleted one")
	m := b.Call(t, http.StatusOK, "GET", "/api/v1/messages/"+p.PartitionID+"/x", nil).Map(t)
	require.Equal(t, map[string]any{"n": 9.0}, m["payload"])
}

func TestDeletingAMissingMessageAnswers200WithSuccessFalse(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pushTx(t, b, "q", "p", "x")
	pid := partitionID(t, b, "q", "p")
	deleteMessage(t, b, pid, "x")
	for _, c := range [][2]string{{pid, "x"}, {pid, "never"}, {"not-a-uuid", "x"}, {"0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f", "x"}} {
		require.Equal(t, map[string]any{"success": false, "partitionId": c[0], "transactionId": c[1], "message": "Message not found"},
			deleteMessage(t, b, c[0], c[1]))
	}
}

func TestAckingADeletedMessageOfALeasedBatchIsMessageNotFoundAndTheCursorStays(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pushTx(t, b, "q", "p", "a", "b", "c")
	p := b.Pop(t, "/api/v1/pop/queue/q?batch=3")
	ns := p.Ns()
	require.Equal(t, []int{0, 1, 2}, ns)
	deleteMessage(t, b, p.PartitionID, "a")
	acks := array(t, b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": "a",
		"partitionId": p.PartitionID, "leaseId": p.LeaseID}))
	require.Equal(t, false, acks[0]["success"])
	require.Equal(t, "Message not found", acks[0]["error"])
	require.Zero(t, b.Cursor(t, "q").Committed)
	for _, tx := range []string{"b", "c"} {
		b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": tx, "partitionId": p.PartitionID, "leaseId": p.LeaseID})
	}
	require.Nil(t, b.Cursor(t, "q").LeaseID, "acking the rest released the batch")
}

func TestABatchEndsAtItsLastMessageThatWasNotDeleted(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pushTx(t, b, "q", "p", "a", "b", "c")
	pid := partitionID(t, b, "q", "p")
	deleteMessage(t, b, pid, "c")
	p := b.Pop(t, "/api/v1/pop/queue/q?batch=10")
	ns := p.Ns()
	require.Equal(t, []int{0, 1}, ns)
	for _, tx := range []string{"a", "b"} {
		b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": tx, "partitionId": p.PartitionID, "leaseId": p.LeaseID})
	}
	require.Nil(t, b.Cursor(t, "q").LeaseID, "acking what was delivered releases the lease")

	// A batch of nothing but deleted messages is passed over at once.
	pushTx(t, b, "q", "p", "d")
	deleteMessage(t, b, pid, "d")
	ns = b.Pop(t, "/api/v1/pop/queue/q/partition/p?batch=10").Ns()
	require.Empty(t, ns)
	pushTx(t, b, "q", "p", "e")
	ns = b.Pop(t, "/api/v1/pop/queue/q/partition/p?batch=10").Ns()
	require.Equal(t, []int{0}, ns, "e, pushed after, is delivered")
}

func TestMessagesListingReachesBackThroughOlderSegments(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pushTx(t, b, "q", "p", "now")
	for _, age := range []time.Duration{10 * time.Minute, 3 * time.Hour, 48 * time.Hour} {
		at := time.Now().Add(-age)
		require.NoError(t, b.DB.AppendSegments(t.Context(), b.Tenant, "q", "p",
			[]segment.Frame{{ID: uuid.New(), TransactionID: age.String(), CreatedAt: at.UnixMicro(), Payload: []byte("1")}}))
	}
	from := "from=" + url.QueryEscape(time.Now().Add(-72*time.Hour).Format(time.RFC3339))
	require.Equal(t, []string{"now", "10m0s", "3h0m0s", "48h0m0s"}, txids(list(t, b, from).Messages))
	require.Equal(t, []string{"10m0s", "3h0m0s"}, txids(list(t, b, from+"&limit=2&offset=1").Messages))
	require.Equal(t, []string{"now", "10m0s"}, txids(list(t, b, "").Messages), "the last hour")
	require.Equal(t, []string{"now", "10m0s", "3h0m0s", "48h0m0s"},
		txids(array(t, b.Call(t, http.StatusOK, "GET", "/api/v1/status/queues/q/messages", nil))))
}

func TestMessagesToIsRoundedUpToTheEndOfItsMinute(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pushTx(t, b, "q", "p", "x")
	at, err := time.Parse(time.RFC3339Nano, list(t, b, "").Messages[0]["createdAt"].(string))
	require.NoError(t, err)
	to := url.QueryEscape(at.Truncate(time.Minute).Format(time.RFC3339))
	require.Equal(t, []string{"x"}, txids(list(t, b, "to="+to).Messages), "to=%s", to)
	before := url.QueryEscape(at.Truncate(time.Minute).Add(-time.Second).Format(time.RFC3339))
	require.Empty(t, list(t, b, "to="+before).Messages, "the end of the minute before is excluded")
}
