package app_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/test/brokertest"
)

// textQueries are the query parameters the routes read (the numbers,
// times and booleans too: a bad one must not get further).
var textQueries = []string{"queue", "partition", "consumerGroup", "namespace", "ns", "task", "hostname", "status",
	"queryId", "subscriptionMode", "subscriptionFrom", "interval", "from", "to", "limit", "offset", "batch",
	"partitions", "timeout", "wait", "autoAck", "minLagSeconds", "deleteMetadata"}

// bodies are a well-formed body of each route that takes one, with the
// names of real things (the queue q1, its partition, a popped message and
// lease, a registered query) so that every string gets as far as it can.
func bodies(pid, tx, lease, qid string) map[string]string {
	return map[string]string{
		"POST /api/v1/configure": `{"queue":"q9","namespace":"n","task":"t","options":{"leaseTime":30}}`,
		"POST /api/v1/push": `{"items":[{"queue":"q1","partition":"p","payload":{"k":"v"},"transactionId":"x",` +
			`"traceId":"0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"}]}`,
		"POST /api/v1/ack": `{"transactionId":"` + tx + `","partitionId":"` + pid + `","consumerGroup":"g",` +
			`"status":"failed","error":"e","leaseId":"` + lease + `"}`,
		"POST /api/v1/ack/batch": `{"consumerGroup":"g","acknowledgments":[{"transactionId":"` + tx + `","partitionId":"` + pid +
			`","consumerGroup":"g","status":"failed","error":"e"}]}`,
		"POST /api/v1/transaction": `{"operations":[{"type":"push","items":[{"queue":"q1","partition":"p","transactionId":"x",` +
			`"payload":{"k":"v"}}]},{"type":"ack","transactionId":"` + tx + `","partitionId":"` + pid + `","consumerGroup":"g",` +
			`"status":"completed"}]}`,
		"POST /api/v1/lease/{leaseId}/extend": `{"seconds":10}`,
		"POST /api/v1/traces": `{"transactionId":"` + tx + `","partitionId":"` + pid + `","consumerGroup":"g","eventType":"e",` +
			`"data":{"k":"v"},"traceNames":["a"]}`,
		"POST /streams/v1/queries":   `{"name":"n2","source_queue":"q1","sink_queue":"q2","config_hash":"h"}`,
		"POST /streams/v1/state/get": `{"query_id":"` + qid + `","partition_id":"` + pid + `","keys":["k"],"key_prefix":"p"}`,
		"POST /streams/v1/cycle": `{"query_id":"` + qid + `","partition_id":"` + pid + `","consumer_group":"g",` +
			`"state_ops":[{"type":"upsert","key":"k","value":{"k":"v"}}],"push_items":[{"queue":"q2","partition":"p",` +
			`"payload":{"k":"v"},"transactionId":"x"}],"ack":{"transactionId":"` + tx + `","leaseId":"` + lease + `","status":"completed"}}`,
		"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek":                        `{"timestamp":"2026-01-01T00:00:00Z"}`,
		"POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek": `{"timestamp":"2026-01-01T00:00:00Z"}`,
		"POST /api/v1/consumer-groups/{group}/subscription":                               `{"subscriptionTimestamp":"2026-01-01T00:00:00Z"}`,
	}
}

// spoiled are the body's variants with one string, a value or an
// object's key, given a NUL.
func spoiled(t *testing.T, body string) (out []string) {
	var root any
	require.NoError(t, json.Unmarshal([]byte(body), &root))
	emit := func() {
		b, err := json.Marshal(root)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	var walk func(v any, set func(any))
	walk = func(v any, set func(any)) {
		switch x := v.(type) {
		case string:
			set(x + "\x00")
			emit()
			set(x)
		case []any:
			for i := range x {
				walk(x[i], func(n any) { x[i] = n })
			}
		case map[string]any:
			for k := range x {
				walk(x[k], func(n any) { x[k] = n })
				x[k+"\x00"] = x[k]
				emit()
				delete(x, k+"\x00")
			}
		}
	}
	walk(root, func(n any) { root = n })
	return out
}

var pathValue = regexp.MustCompile(`\{[A-Za-z]+\}`)

// A string PostgreSQL text cannot hold, in a body, a path segment or a query
// parameter of any route, is the client's fault: never a 5xx.
func TestNoRouteAnswers5xxToNULOrInvalidUTF8InAnyString(t *testing.T) {
	b := brokertest.Shared(t)
	if b.Tenant != auth.DefaultTenant { // a tenant of its own in secure mode registers queries under a grant
		b.Grant(t, b.Tenant, nil)
	}
	admin := b.Token
	must := func(method, path, body string) brokertest.Response {
		r := b.Do(t, method, path, admin, body)
		require.Less(t, r.Status, 300, "%s %s: %s", method, path, r.Body)
		return r
	}
	must("POST", "/api/v1/push", `{"items":[{"queue":"q1","payload":{"n":1}},{"queue":"q1","payload":{"n":2}}]}`)
	p := must("GET", "/api/v1/pop/queue/q1?batch=1", "")
	var popped struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
			LeaseID       string `json:"leaseId"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(p.Body, &popped))
	m := popped.Messages[0]
	q := must("POST", "/streams/v1/queries", `{"name":"n1","source_queue":"q1","sink_queue":"q2","config_hash":"h"}`)
	var reg struct {
		QueryID string `json:"query_id"`
	}
	require.NoError(t, json.Unmarshal(q.Body, &reg))
	withBody := bodies(m.PartitionID, m.TransactionID, m.LeaseID, reg.QueryID)
	values := map[string]string{"queue": "q1", "group": "g", "partition": "Default", "partitionId": m.PartitionID,
		"transactionId": m.TransactionID, "leaseId": m.LeaseID, "traceName": "a"}
	check := func(method, path, body string) {
		var send any
		if body != "" {
			send = body
		}
		r := b.Do(t, method, path, admin, send)
		if r.Status >= 500 && r.Status != http.StatusNotImplemented {
			t.Errorf("%s %s %q = %d %s", method, path, body, r.Status, r.Body)
		}
	}
	for _, c := range apiRoutes() {
		key := c.method + " " + c.path
		fill := func(bad string) []string { // the path, with each value in turn bad
			var out []string
			names := pathValue.FindAllString(c.path, -1)
			for i := range names {
				path := c.path
				for j, n := range names {
					v := values[strings.Trim(n, "{}")]
					if i == j {
						v = bad
					}
					path = strings.Replace(path, n, url.PathEscape(v), 1)
				}
				out = append(out, path)
			}
			return out
		}
		good := pathValue.ReplaceAllStringFunc(c.path, func(n string) string { return url.PathEscape(values[strings.Trim(n, "{}")]) })
		body := withBody[key]
		for _, bad := range []string{"a\x00b", "a\xffb"} {
			for _, path := range fill(bad) {
				check(c.method, path, body)
			}
			for _, name := range textQueries {
				check(c.method, good+"?"+name+"="+url.QueryEscape(bad), body)
			}
		}
		if body != "" {
			for _, s := range spoiled(t, body) {
				check(c.method, good, s)
			}
		}
	}
}
