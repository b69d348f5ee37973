package admin_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/domain/retention"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

// traces counts the traces of b's tenant.
func traces(t *testing.T, b *brokertest.Broker) dbtest.Traces {
	t.Helper()
	n, err := b.DB.Traces(t.Context(), b.Tenant)
	require.NoError(t, err)
	return n
}

func trace(t *testing.T, b *brokertest.Broker, want int, body map[string]any) map[string]any {
	t.Helper()
	return b.Call(t, want, "POST", "/api/v1/traces", body).Map(t)
}

func TestATraceIsRecordedAgainstItsMessageAndReadOldestFirstWithSortedNames(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pid := pushTx(t, b, "orders", "Default", "inv-1", "inv-2")
	first := trace(t, b, http.StatusCreated, map[string]any{"transactionId": "inv-1", "partitionId": pid,
		"consumerGroup": "billing", "eventType": "step", "data": map[string]any{"step": "charged"}, "traceNames": []string{"zeta", "acme", "acme"}})
	require.Equal(t, true, first["success"])
	require.NotEmpty(t, first["traceId"])
	second := trace(t, b, http.StatusCreated, map[string]any{"transactionId": "inv-1", "partitionId": pid, "data": []int{1},
		"traceNames": "solo", "consumerGroup": nil, "eventType": nil})
	trace(t, b, http.StatusCreated, map[string]any{"transactionId": "inv-2", "partitionId": pid, "data": "x", "traceNames": nil})

	var got struct {
		Traces []map[string]any `json:"traces"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/traces/"+pid+"/inv-1", nil).JSON(t, &got)
	require.Len(t, got.Traces, 2)
	a, c := got.Traces[0], got.Traces[1]
	require.Equal(t, first["traceId"], a["id"], "oldest first")
	require.Equal(t, "step", a["event_type"])
	require.Equal(t, map[string]any{"step": "charged"}, a["data"])
	require.Equal(t, "billing", a["consumer_group"])
	require.Equal(t, shared, a["worker_id"], "the replica's name")
	require.Equal(t, []any{"acme", "zeta"}, a["trace_names"], "sorted, each once")
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, a["created_at"])
	require.Equal(t, second["traceId"], c["id"])
	require.Equal(t, "info", c["event_type"], "the default")
	require.Equal(t, "__QUEUE_MODE__", c["consumer_group"])
	require.Equal(t, []any{"solo"}, c["trace_names"], "a string is one name")

	require.JSONEq(t, `{"traces": []}`, string(b.Call(t, http.StatusOK, "GET", "/api/v1/traces/"+pid+"/nobody", nil).Body))
	require.JSONEq(t, `{"traces": []}`, string(b.Call(t, http.StatusOK, "GET", "/api/v1/traces/0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f/inv-1", nil).Body))
	require.NotEmpty(t, b.Call(t, http.StatusBadRequest, "GET", "/api/v1/traces/not-a-uuid/inv-1", nil).Map(t)["error"])
}

func TestATraceNeedsItsMessageIdsAndDataAndAnUnknownMessageIs404(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pid := pushTx(t, b, "orders", "Default", "inv-1")
	for body, want := range map[string]string{
		`{"partitionId": "` + pid + `", "data": {}}`:                                                   "transactionId and partitionId are required",
		`{"transactionId": "inv-1", "data": {}}`:                                                       "transactionId and partitionId are required",
		`{"transactionId": "inv-1", "partitionId": null, "data": {}}`:                                  "transactionId and partitionId are required",
		`{"transactionId": "inv-1", "partitionId": "` + pid + `"}`:                                     "data is required",
		`{"transactionId": "inv-1", "partitionId": "` + pid + `", "data": null}`:                       "data is required",
		`{"transactionId": 5, "partitionId": "` + pid + `", "data": {}}`:                               "transactionId must be a string",
		`{"transactionId": "inv-1", "partitionId": "nope", "data": {}}`:                                "partitionId",
		`{"transactionId": "inv-1", "partitionId": "` + pid + `", "data": {}, "traceNames": [1]}`:      "traceNames must be",
		`{"transactionId": "inv-1", "partitionId": "` + pid + `", "data": {}, "eventType": 3}`:         "eventType must be a string",
		`{"transactionId": "inv-1", "partitionId": "` + pid + `", "data": {"a": "x\u0000"}}`:           "data must not contain",
		`{"transactionId": "inv\u0000", "partitionId": "` + pid + `", "data": {}}`:                     "transactionId must not contain NUL",
		`{"transactionId": "inv-1", "partitionId": "` + pid + `", "data": {}, "traceNames": "\u0000"}`: "traceNames must not contain NUL",
		`[]`:      "JSON object",
		`{"x": 1`: "Invalid JSON",
		``:        "transactionId and partitionId are required",
	} {
		r := b.Call(t, http.StatusBadRequest, "POST", "/api/v1/traces", body)
		require.Contains(t, r.Map(t)["error"], want, "body %s", body)
	}
	r := b.Call(t, http.StatusNotFound, "POST", "/api/v1/traces", map[string]any{"transactionId": "inv-9", "partitionId": pid, "data": map[string]any{}})
	require.JSONEq(t, `{"success": false, "error": "Message not found"}`, string(r.Body))
	r = b.Call(t, http.StatusNotFound, "POST", "/api/v1/traces", map[string]any{"transactionId": "inv-1",
		"partitionId": "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f", "data": map[string]any{}})
	require.JSONEq(t, `{"success": false, "error": "Message not found"}`, string(r.Body))
	require.Zero(t, traces(t, b).Traces)
	trace(t, b, http.StatusCreated, map[string]any{"transactionId": "inv-1", "partitionId": pid, "data": `a\u0000`})
	for _, path := range []string{"/api/v1/traces/by-name/%E2", "/api/v1/traces/" + pid + "/%E2", "/api/v1/traces/" + pid + "/a%00"} {
		require.NotEmpty(t, b.Call(t, http.StatusBadRequest, "GET", path, nil).Map(t)["error"], path)
	}
}

func TestTracesByNamePagesOldestFirstWithTheirMessagesAndPayloads(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pid := pushTx(t, b, "orders", "p", "m0", "m1", "m2")
	for _, tx := range []string{"m0", "m1", "m2", "m1"} {
		trace(t, b, http.StatusCreated, map[string]any{"transactionId": tx, "partitionId": pid, "data": map[string]any{"tx": tx},
			"traceNames": []string{"tenant acme", "other"}})
	}
	var got struct {
		Traces     []map[string]any `json:"traces"`
		Total      int              `json:"total"`
		Pagination map[string]int   `json:"pagination"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/traces/by-name/tenant+acme?limit=2&offset=1", nil).JSON(t, &got)
	require.Equal(t, 4, got.Total)
	require.Equal(t, map[string]int{"limit": 2, "offset": 1}, got.Pagination)
	require.Len(t, got.Traces, 2)
	x := got.Traces[0]
	require.Equal(t, "m1", x["transaction_id"], "oldest first, then paged")
	require.Equal(t, map[string]any{"tx": "m1"}, x["data"])
	require.Equal(t, pid, x["partition_id"])
	require.Equal(t, "orders", x["queue_name"])
	require.Equal(t, "p", x["partition_name"])
	require.Equal(t, map[string]any{"n": 1.0}, x["message_payload"])
	require.Equal(t, []any{"other", "tenant acme"}, x["trace_names"])
	require.Equal(t, "m2", got.Traces[1]["transaction_id"])

	b.Call(t, http.StatusOK, "GET", "/api/v1/traces/by-name/tenant%20acme?limit=x", nil).JSON(t, &got)
	require.Equal(t, 100, got.Pagination["limit"], "a limit that does not parse is the default")
	require.Len(t, got.Traces, 4)
	b.Call(t, http.StatusOK, "GET", "/api/v1/traces/by-name/names", nil).JSON(t, &got)
	require.Zero(t, got.Total, "by-name/names is the name \"names\", which no trace carries")
}

func TestTraceNamesCountTracesAndMessagesMostRecentlySeenFirst(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pid := pushTx(t, b, "orders", "Default", "m0", "m1")
	for _, x := range []struct{ tx, name string }{{"m0", "old"}, {"m0", "busy"}, {"m1", "busy"}, {"m1", "busy"}} {
		trace(t, b, http.StatusCreated, map[string]any{"transactionId": x.tx, "partitionId": pid, "data": 1, "traceNames": x.name})
	}
	var got struct {
		Names []struct {
			Name     string `json:"trace_name"`
			Traces   int    `json:"trace_count"`
			Messages int    `json:"message_count"`
			LastSeen string `json:"last_seen"`
		} `json:"trace_names"`
		Total      int            `json:"total"`
		Pagination map[string]int `json:"pagination"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/traces/names", nil).JSON(t, &got)
	require.Equal(t, 2, got.Total)
	require.Equal(t, map[string]int{"limit": 50, "offset": 0}, got.Pagination)
	require.Len(t, got.Names, 2)
	require.Equal(t, "busy", got.Names[0].Name, "seen last")
	require.Equal(t, 3, got.Names[0].Traces)
	require.Equal(t, 2, got.Names[0].Messages)
	require.Equal(t, "old", got.Names[1].Name)
	require.NotEmpty(t, got.Names[1].LastSeen)
	b.Call(t, http.StatusOK, "GET", "/api/v1/traces/names?limit=1&offset=5", nil).JSON(t, &got)
	require.Empty(t, got.Names)
	require.Equal(t, 2, got.Total, "a page past the end still counts the names")
}

func TestTracesGoWithTheirMessagesSegmentAndWithTheirQueue(t *testing.T) {
	t.Parallel()
	b := start(t) // the retention sweep is the database's: it would sweep what other tests arranged
	gone := pushTx(t, b, "aged", "Default", "m0")
	kept := pushTx(t, b, "kept", "Default", "m0")
	deleted := pushTx(t, b, "deleted", "Default", "m0")
	for _, pid := range []string{gone, kept, deleted} {
		trace(t, b, http.StatusCreated, map[string]any{"transactionId": "m0", "partitionId": pid, "data": 1, "traceNames": "n"})
	}
	// What retention does to the segment that held aged's message.
	require.NoError(t, b.DB.EmptyPartition(t.Context(), b.Tenant, "aged", "Default"))
	b.Call(t, http.StatusOK, "DELETE", "/api/v1/resources/queues/deleted", nil)
	n, err := sweepTraces(t, b)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	left := traces(t, b)
	require.Equal(t, 1, left.Traces)
	require.Equal(t, 1, left.Names, "names go with their trace")
	require.Len(t, b.Call(t, http.StatusOK, "GET", "/api/v1/traces/"+kept+"/m0", nil).Map(t)["traces"], 1)
}

// sweepTraces runs the retention sweep, which sweeps the traces, on the
// broker's database now.
func sweepTraces(t *testing.T, b *brokertest.Broker) (int64, error) {
	t.Helper()
	st, err := retention.New(db.New(b.Pool), slog.New(slog.NewTextHandler(io.Discard, nil)), retention.Settings{
		DedupWindow: time.Hour, RetentionChunk: 1000, EvictionChunk: 1000, CleanupAfter: 24 * time.Hour,
		MetricsAge: 24 * time.Hour}, func(uuid.UUID, uuid.UUID) {}).Sweep(context.Background())
	return st.Traces, err
}

func TestATraceFindsItsMessageInTheGroupsBatchOrAnywhereInThePartition(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pid := pushTx(t, b, "orders", "Default", "m0", "m1")
	pushTx(t, b, "orders", "Default", "m2", "m3")
	p := b.Pop(t, "/api/v1/pop/queue/orders?batch=1&consumerGroup=g")
	require.Len(t, p.Messages, 1)
	p = b.Pop(t, "/api/v1/pop/queue/orders?batch=2&consumerGroup=h&subscriptionFrom=1970-01-01T00:00:00Z")
	require.Len(t, p.Messages, 2)
	for _, x := range []struct{ tx, group string }{{"m0", "g"}, {"m1", "h"}, {"m3", "g"}, {"m2", "nobody"}} {
		trace(t, b, http.StatusCreated, map[string]any{"transactionId": x.tx, "partitionId": pid, "consumerGroup": x.group,
			"data": x.tx, "traceNames": "n"})
	}
	var got struct {
		Traces []map[string]any `json:"traces"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/traces/by-name/n", nil).JSON(t, &got)
	require.Len(t, got.Traces, 4)
	for i, want := range []float64{0, 1, 1, 0} { // each trace's own message: m0 and m2 are n 0, m1 and m3 n 1
		require.Equal(t, map[string]any{"n": want}, got.Traces[i]["message_payload"], "trace %d", i)
	}
	require.Equal(t, 4, traces(t, b).Messages)
}

func TestDeletingAMessageDeletesItsTraces(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	pid := pushTx(t, b, "orders", "Default", "inv-1", "inv-2")
	for _, tx := range []string{"inv-1", "inv-2"} {
		trace(t, b, http.StatusCreated, map[string]any{"transactionId": tx, "partitionId": pid, "data": 1, "traceNames": "n"})
	}
	require.Equal(t, true, deleteMessage(t, b, pid, "inv-1")["success"])
	require.JSONEq(t, `{"traces": []}`, string(b.Call(t, http.StatusOK, "GET", "/api/v1/traces/"+pid+"/inv-1", nil).Body))
	var kept struct {
		Traces []map[string]any `json:"traces"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/traces/"+pid+"/inv-2", nil).JSON(t, &kept)
	require.Len(t, kept.Traces, 1, "the other message keeps its trace")
}
