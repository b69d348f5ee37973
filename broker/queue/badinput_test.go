package queue_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/test/brokertest"
)

// requireRefused sends each body to path and requires a 4xx with an error
// message, and that nothing was written to the log, the cursors or the
// queues.
func requireRefused(t *testing.T, b *brokertest.Broker, method, path string, bodies ...any) {
	t.Helper()
	before := count(t, b, `SELECT (SELECT count(*) FROM queen.log_segments) + (SELECT count(*) FROM queen.queues)
		+ (SELECT coalesce(sum(committed), 0) FROM queen.cursors) + (SELECT count(*) FROM queen.dead_letters)`)
	for _, body := range bodies {
		resp := b.Do(t, method, path, "", body)
		require.GreaterOrEqual(t, resp.Status, 400, "%s %v: %s", path, body, resp.Body)
		require.Less(t, resp.Status, 500, "%s %v: %s", path, body, resp.Body)
		require.NotEmpty(t, resp.Map(t)["error"], "%s %v", path, body)
	}
	after := count(t, b, `SELECT (SELECT count(*) FROM queen.log_segments) + (SELECT count(*) FROM queen.queues)
		+ (SELECT coalesce(sum(committed), 0) FROM queen.cursors) + (SELECT count(*) FROM queen.dead_letters)`)
	require.Equal(t, before, after, "a refused request wrote something")
}

func TestPushRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	requireRefused(t, b, "POST", "/api/v1/push",
		"", "not json", `{"items": {}}`, `{}`, `{"items": [{"payload": 1}]}`,
		`{"items": [{"queue": 5}]}`, `{"items": [{"queue": "q", "partition": 7}]}`,
		`{"items": [{"queue": "q", "transactionId": 7}]}`, `{"items": [{"queue": "q", "traceId": "nope"}]}`,
		`{"items": [{"queue": "ok", "payload": 1}, {"queue": "bad name"}]}`,
		`{"items": [{"queue": "q", "partition": "`+strings.Repeat("x", 256)+`"}]}`,
	)
}

func TestPushOf20MiBIs413AndWritesNothing(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	big := `{"items": [{"queue": "q", "payload": "` + strings.Repeat("x", 20<<20) + `"}]}`
	resp := b.Do(t, "POST", "/api/v1/push", "", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.Status)
	require.NotEmpty(t, resp.Map(t)["error"])
	require.Zero(t, count(t, b, `SELECT count(*) FROM queen.queues`))
}

func TestPushOf1MiBPayloadIsAccepted(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	out := push(t, b, map[string]any{"queue": "q", "payload": strings.Repeat("x", 1<<20)})
	require.Equal(t, "queued", out[0]["status"])
	p := pop(t, b, "/api/v1/pop/queue/q")
	require.Len(t, p.Messages[0].Data, 1<<20)
}

func TestPopRefusesBadParameters(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	push(t, b, msgs("q", "Default", 0, 1)...)
	for _, q := range []string{"batch=-1", "batch=0", "batch=x", "partitions=0", "timeout=-5", "wait=maybe",
		"autoAck=yes"} {
		requireRefused(t, b, "GET", "/api/v1/pop/queue/q?"+q, nil)
	}
	require.Equal(t, 0, count(t, b, `SELECT count(*) FROM queen.cursors`))
}

func TestAckRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	push(t, b, msgs("q", "Default", 0, 1)...)
	p := pop(t, b, "/api/v1/pop/queue/q")
	tx, pid := p.Messages[0].TransactionID, p.PartitionID
	requireRefused(t, b, "POST", "/api/v1/ack",
		"", "{", `{"partitionId": "`+pid+`"}`, `{"transactionId": "`+tx+`"}`,
		`{"transactionId": "`+tx+`", "partitionId": "not-a-uuid"}`,
		`{"transactionId": 5, "partitionId": "`+pid+`"}`,
		`{"transactionId": "`+tx+`", "partitionId": "`+pid+`", "leaseId": "bad"}`,
		`{"transactionId": "`+tx+`", "partitionId": "`+pid+`", "status": "done-ish"}`,
	)
	requireRefused(t, b, "POST", "/api/v1/ack/batch",
		`{}`, `{"acknowledgments": {}}`,
		`{"acknowledgments": [{"transactionId": "`+tx+`", "partitionId": "`+pid+`"}, {"transactionId": "`+tx+`"}]}`,
	)
}

func TestLeaseExtendRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	requireRefused(t, b, "POST", "/api/v1/lease/not-a-uuid/extend", `{}`)
	requireRefused(t, b, "POST", "/api/v1/lease/0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f/extend",
		`{"seconds": "ten"}`, `{"seconds": -1}`, "")
}

func TestTransactionRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	requireRefused(t, b, "POST", "/api/v1/transaction",
		`{}`, `{"operations": []}`, `{"operations": [{}]}`, `{"operations": [{"type": "pop"}]}`,
		`{"operations": [{"type": "push"}]}`, `{"operations": [{"type": "push", "items": [{"queue": "bad name"}]}]}`,
		`{"operations": [{"type": "push", "items": [{"queue": "ok"}]}, {"type": "ack", "transactionId": "x"}]}`,
	)
}
