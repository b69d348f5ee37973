package queue_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

// requireRefused sends each body to path and requires a 4xx with an error
// message, and that nothing of the queues named was written: their log,
// cursors, dead letters, nor the queues themselves.
func requireRefused(t *testing.T, b *brokertest.Broker, queues []string, method, path string, bodies ...any) {
	t.Helper()
	var before []dbtest.Queue
	for _, q := range queues {
		before = append(before, b.Stored(t, q))
	}
	for _, body := range bodies {
		resp := b.Do(t, method, path, "", body)
		require.GreaterOrEqual(t, resp.Status, 400, "%s %v: %s", path, body, resp.Body)
		require.Less(t, resp.Status, 500, "%s %v: %s", path, body, resp.Body)
		require.NotEmpty(t, resp.Map(t)["error"], "%s %v", path, body)
	}
	for i, q := range queues {
		require.Equal(t, before[i], b.Stored(t, q), "a refused request wrote to %s", q)
	}
}

func TestPushRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q, ok := b.Q("q"), b.Q("ok")
	requireRefused(t, b, []string{q, ok, "bad name"}, "POST", "/api/v1/push",
		"", "not json", `{"items": {}}`, `{}`, `{"items": [{"payload": 1}]}`,
		`{"items": [{"queue": 5}]}`, `{"items": [{"queue": "`+q+`", "partition": 7}]}`,
		`{"items": [{"queue": "`+q+`", "transactionId": 7}]}`, `{"items": [{"queue": "`+q+`", "traceId": "nope"}]}`,
		`{"items": [{"queue": "`+ok+`", "payload": 1}, {"queue": "bad name"}]}`,
		`{"items": [{"queue": "`+q+`", "partition": "`+strings.Repeat("x", 256)+`"}]}`,
	)
}

func TestPushOf20MiBIs413AndWritesNothing(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	big := `{"items": [{"queue": "` + q + `", "payload": "` + strings.Repeat("x", 20<<20) + `"}]}`
	resp := b.Do(t, "POST", "/api/v1/push", "", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.Status)
	require.NotEmpty(t, resp.Map(t)["error"])
	require.False(t, b.Stored(t, q).Exists)
}

func TestPushOf1MiBPayloadIsAccepted(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	out := b.Push(t, map[string]any{"queue": q, "payload": strings.Repeat("x", 1<<20)})
	require.Equal(t, "queued", out[0]["status"])
	p := b.Pop(t, "/api/v1/pop/queue/"+q)
	require.Len(t, p.Messages[0].Data, 1<<20)
}

func TestPopRefusesBadParameters(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 1)...)
	for _, query := range []string{"batch=-1", "batch=0", "batch=x", "partitions=0", "timeout=-5", "wait=maybe",
		"autoAck=yes"} {
		requireRefused(t, b, []string{q}, "GET", "/api/v1/pop/queue/"+q+"?"+query, nil)
	}
	require.Empty(t, b.Cursors(t, q))
}

func TestAckRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 1)...)
	p := b.Pop(t, "/api/v1/pop/queue/"+q)
	tx, pid := p.Messages[0].TransactionID, p.PartitionID
	requireRefused(t, b, []string{q}, "POST", "/api/v1/ack",
		"", "{", `{"partitionId": "`+pid+`"}`, `{"transactionId": "`+tx+`"}`,
		`{"transactionId": "`+tx+`", "partitionId": "not-a-uuid"}`,
		`{"transactionId": 5, "partitionId": "`+pid+`"}`,
		`{"transactionId": "`+tx+`", "partitionId": "`+pid+`", "leaseId": "bad"}`,
		`{"transactionId": "`+tx+`", "partitionId": "`+pid+`", "status": "done-ish"}`,
	)
	requireRefused(t, b, []string{q}, "POST", "/api/v1/ack/batch",
		`{}`, `{"acknowledgments": {}}`,
		`{"acknowledgments": [{"transactionId": "`+tx+`", "partitionId": "`+pid+`"}, {"transactionId": "`+tx+`"}]}`,
	)
}

func TestLeaseExtendRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	requireRefused(t, b, nil, "POST", "/api/v1/lease/not-a-uuid/extend", `{}`)
	requireRefused(t, b, nil, "POST", "/api/v1/lease/0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f/extend",
		`{"seconds": "ten"}`, `{"seconds": -1}`, "")
}

func TestTransactionRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	ok := b.Q("ok")
	requireRefused(t, b, []string{ok, "bad name"}, "POST", "/api/v1/transaction",
		`{}`, `{"operations": []}`, `{"operations": [{}]}`, `{"operations": [{"type": "pop"}]}`,
		`{"operations": [{"type": "push"}]}`, `{"operations": [{"type": "push", "items": [{"queue": "bad name"}]}]}`,
		`{"operations": [{"type": "push", "items": [{"queue": "`+ok+`"}]}, {"type": "ack", "transactionId": "x"}]}`,
	)
}

// Issue 15, defect 1: PostgreSQL text holds neither NUL nor invalid UTF-8,
// so a request string that does is a 400 naming the field, never a 500.
func TestStringsWithNULOrInvalidUTF8AreRefusedWithTheirField(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q, q1 := b.Q("q"), b.Q("q1")
	pid := "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
	for _, c := range []struct {
		method, path, body, field string
	}{
		{"POST", "/api/v1/push", `{"items":[{"queue":"` + q1 + `","payload":1,"transactionId":"a\u0000b"}]}`, "items[0].transactionId"},
		{"POST", "/api/v1/push", `{"items":[{"queue":"` + q1 + `","payload":1,"partition":"p\u0000"}]}`, "items[0].partition"},
		{"POST", "/api/v1/configure", `{"queue":"` + q1 + `","namespace":"n\u0000"}`, "namespace"},
		{"POST", "/api/v1/configure", `{"queue":"` + q1 + `","task":"t\u0000"}`, "task"},
		{"POST", "/api/v1/ack", `{"transactionId":"t\u0000","partitionId":"` + pid + `"}`, "transactionId"},
		{"POST", "/api/v1/ack", `{"transactionId":"t","partitionId":"` + pid + `","consumerGroup":"g\u0000"}`, "consumerGroup"},
		{"POST", "/api/v1/ack", `{"transactionId":"t","partitionId":"` + pid + `","status":"failed","error":"e\u0000"}`, "error"},
		{"POST", "/api/v1/ack/batch", `{"acknowledgments":[{"transactionId":"t\u0000","partitionId":"` + pid + `"}]}`, "acknowledgments[0].transactionId"},
		{"POST", "/api/v1/ack/batch", `{"consumerGroup":"a\u0000b","acknowledgments":[{"transactionId":"t","partitionId":"` + pid + `"}]}`, "consumerGroup"},
		{"POST", "/api/v1/ack/batch", `{"acknowledgments":[{"transactionId":"t","partitionId":"` + pid + `","consumerGroup":"a\u0000b"}]}`, "acknowledgments[0].consumerGroup"},
		{"POST", "/api/v1/transaction", `{"operations":[{"type":"push","items":[{"queue":"` + q + `","transactionId":"\u0000"}]}]}`, "operations[0].items[0].transactionId"},
		{"DELETE", "/api/v1/resources/queues/%00", ``, "queue"},
		{"DELETE", "/api/v1/resources/queues/%FF", ``, "queue"},
		{"GET", "/api/v1/dlq?consumerGroup=%00", ``, "consumerGroup"},
		{"GET", "/api/v1/dlq?queue=%FF", ``, "queue"},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		r := b.Do(t, c.method, c.path, b.Token, body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s %s %s: %s", c.method, c.path, c.body, r.Body)
		require.Contains(t, r.Map(t)["error"], c.field, "%s %s %s", c.method, c.path, c.body)
	}
	for _, name := range []string{q, q1} {
		require.False(t, b.Stored(t, name).Exists, name)
	}
}

// Issue 15, defect 2: every integer option is a 32-bit integer.
func TestConfigureIntegerOptionsOutsideTheir32BitRangeAre400(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q1 := b.Q("q1")
	for _, o := range []string{"leaseTime", "retryLimit", "retryDelay", "maxSize", "ttl", "priority", "delayedProcessing",
		"windowBuffer", "retentionSeconds", "completedRetentionSeconds", "maxWaitTimeSeconds"} {
		for _, v := range []string{"2147483648", "-9223372036854775808"} {
			r := b.Do(t, "POST", "/api/v1/configure", b.Token, `{"queue":"`+q1+`","options":{"`+o+`":`+v+`}}`)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s = %s: %s", o, v, r.Body)
			require.Contains(t, r.Map(t)["error"], o)
		}
	}
	r := b.Do(t, "POST", "/api/v1/configure", b.Token, `{"queue":"`+q1+`","options":{"priority":-2147483648,"ttl":2147483647}}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}

// Issue 15, defect 9: a transaction that rolls back kept nothing, so none of
// its operations may answer as if it had been kept.
func TestARolledBackTransactionReportsNoOperationAsDone(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	r := b.Do(t, "POST", "/api/v1/transaction", b.Token, map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": q, "payload": 1}}},
		map[string]any{"type": "ack", "transactionId": "nope", "partitionId": "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"},
	}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	m := r.Map(t)
	require.Equal(t, false, m["success"])
	push := m["results"].([]any)[0].(map[string]any)
	require.Equal(t, false, push["success"], "the rolled-back push: %v", push)
	require.Contains(t, push["error"], "rolled back")
	require.NotContains(t, string(r.Body), `"queued"`)
	require.Zero(t, b.Stored(t, q).Frames, "nothing stored")
}

// Issue 15, defect 1, the pop's half: its path segments and group are text.
func TestAPopWithNULOrInvalidUTF8InItsNamesIs400(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	for path, field := range map[string]string{
		"/api/v1/pop/queue/%FF":                           "queue",
		"/api/v1/pop/queue/" + q + "/partition/%00":       "partition",
		"/api/v1/pop/queue/" + q + "?consumerGroup=a%00b": "consumerGroup",
	} {
		r := b.Do(t, "GET", path, b.Token, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", path, r.Body)
		require.Contains(t, r.Map(t)["error"], field, path)
	}
}

// Issue 15, defect 3: a subscriptionFrom PostgreSQL cannot hold is ignored,
// like any unparsable one (queue-admin-api.md §9), never a 500.
func TestASubscriptionFromOutsidePostgreSQLsRangeMeansAll(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	r := b.Do(t, "POST", "/api/v1/push", b.Token, `{"items":[{"queue":"`+q+`","payload":1}]}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	r = b.Do(t, "GET", "/api/v1/pop/queue/"+q+"?consumerGroup=g&subscriptionFrom=0000-01-01T00:00:00Z&autoAck=true", b.Token, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}

func TestAnAckRefusedInAListNamesItsElementBeforeTheField(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pid := "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
	ok := `{"transactionId":"t","partitionId":"` + pid + `"}`
	for _, c := range []struct{ path, body, message string }{
		{"/api/v1/ack/batch", `{"acknowledgments":[` + ok + `,{"transactionId":"t","partitionId":"x"}]}`,
			`acknowledgments[1].partitionId must be a UUID, got "x"`},
		{"/api/v1/ack/batch", `{"acknowledgments":[` + ok + `,` + ok + `,{"partitionId":"` + pid + `"}]}`,
			`acknowledgments[2].transactionId is required`},
		{"/api/v1/ack/batch", `{"acknowledgments":[` + ok + `,{"transactionId":"t","partitionId":"` + pid + `","status":"done"}]}`,
			`acknowledgments[1].status must be ` + db.QueueAckWords + `, not "done"`},
		{"/api/v1/transaction", `{"operations":[{"type":"ack","transactionId":"t","partitionId":"` + pid + `","leaseId":"l"}]}`,
			`operations[0].leaseId must be a UUID, got "l"`},
		{"/api/v1/ack", `{"transactionId":"t","partitionId":"` + pid + `","leaseId":"l"}`,
			`leaseId must be a UUID, got "l"`},
	} {
		r := b.Do(t, "POST", c.path, b.Token, c.body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s %s: %s", c.path, c.body, r.Body)
		require.Equal(t, c.message, r.Map(t)["error"], "%s %s", c.path, c.body)
	}
}
