package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestTenantBProbingTenantAsGroupsAndQueuesReadsExactlyLikeMissing(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t) // tenancy is on: b.Token is tenant A's, and B is one more
	a, other := b.Token, brokertest.Mint(t, b.Tenant+"-b", auth.Admin)
	probes := []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/v1/consumer-groups", nil},
		{"GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", nil},
		{"GET", "/api/v1/consumer-groups/g", nil},
		{"POST", "/api/v1/consumer-groups/g/queues/q/seek", map[string]any{"toEnd": true}},
		{"POST", "/api/v1/consumer-groups/g/queues/q/seek", map[string]any{"timestamp": "1970-01-01T00:00:00Z"}},
		{"POST", "/api/v1/consumer-groups/g/queues/q/partitions/p/seek", nil},
		{"POST", "/api/v1/consumer-groups/g/subscription", map[string]any{"subscriptionTimestamp": "2030-01-01T00:00:00Z"}},
		{"DELETE", "/api/v1/consumer-groups/g/queues/q", nil},
		{"DELETE", "/api/v1/consumer-groups/g", nil},
	}
	probe := func() []brokertest.Response {
		var out []brokertest.Response
		for _, p := range probes {
			r := b.Do(t, p.method, p.path, other, p.body)
			r.Header = nil
			out = append(out, r)
		}
		return out
	}
	missing := probe() // nothing of that name exists anywhere yet

	pushAs := func(n int) {
		items := []map[string]any{}
		for i := range n {
			items = append(items, map[string]any{"queue": "q", "partition": "p", "payload": map[string]any{"n": i}})
		}
		require.Equal(t, http.StatusCreated, b.Do(t, "POST", "/api/v1/push", a, map[string]any{"items": items}).Status)
	}
	pushAs(3)
	r := b.Do(t, "GET", "/api/v1/pop/queue/q/partition/p?batch=1&consumerGroup=g&subscriptionFrom=1970-01-01T00:00:01Z", a, nil)
	require.Equal(t, http.StatusOK, r.Status)
	var p brokertest.Popped
	r.JSON(t, &p)
	before := b.Do(t, "GET", "/api/v1/consumer-groups/g", a, nil)
	beforeList := b.Do(t, "GET", "/api/v1/consumer-groups", a, nil)

	foreign := probe()
	for i := range probes {
		require.Equal(t, missing[i], foreign[i], "%s %s: another tenant's names must read like missing ones", probes[i].method, probes[i].path)
	}

	// And nothing of A's moved.
	require.Equal(t, string(before.Body), string(b.Do(t, "GET", "/api/v1/consumer-groups/g", a, nil).Body))
	require.Equal(t, string(beforeList.Body), string(b.Do(t, "GET", "/api/v1/consumer-groups", a, nil).Body))
	var acks []map[string]any
	b.Do(t, "POST", "/api/v1/ack", a, map[string]any{"transactionId": p.Messages[0].TransactionID,
		"partitionId": p.PartitionID, "leaseId": p.LeaseID, "consumerGroup": "g"}).JSON(t, &acks)
	require.Equal(t, true, acks[0]["success"], "A's lease survived B's seeks and deletions: %v", acks)
}

func TestTenantBReadingMessagesResourcesAndStatusSeesNothingOfTenantA(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	a, other := b.Token, brokertest.Mint(t, b.Tenant+"-b", auth.Admin)
	const window = "from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z"
	recent := lastHour() // a window whose buckets hold A's counts
	paths := []string{
		"/api/v1/status?" + recent, "/api/v1/status?queue=q&" + recent,
		"/api/v1/messages?" + window, "/api/v1/messages?queue=q&" + window, "/api/v1/messages?ns=q&" + window,
		"/api/v1/resources/overview", "/api/v1/resources/queues", "/api/v1/resources/queues/q",
		"/api/v1/resources/namespaces", "/api/v1/resources/tasks",
		"/api/v1/status?" + window, "/api/v1/status?queue=q&" + window, "/api/v1/status/queues", "/api/v1/status/queues/q",
		"/api/v1/status/queues/q/messages",
	}
	// The fields that change from one call to the next whoever calls.
	steady := func(r brokertest.Response) string {
		var m map[string]any
		if json.Unmarshal(r.Body, &m) != nil {
			return fmt.Sprint(r.Status, string(r.Body))
		}
		delete(m, "timestamp")
		delete(m, "workers")
		if rows, ok := m["throughput"].([]any); ok {
			for _, row := range rows { // the cluster's process health, sampled meanwhile
				for _, k := range []string{"minFreeSlots", "queenCpuUserPct", "queenCpuSysPct", "queenRssMb",
					"dbPoolActive", "dbPoolIdle", "dbPoolSize"} {
					delete(row.(map[string]any), k)
				}
			}
		}
		out, err := json.Marshal(m)
		require.NoError(t, err)
		return fmt.Sprint(r.Status, string(out))
	}
	probe := func(token string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, steady(b.Do(t, "GET", p, token, nil)))
		}
		return out
	}
	missing := probe(other)

	seed := func(method, path string, body any, want int) {
		t.Helper()
		r := b.Do(t, method, path, a, body)
		require.Equal(t, want, r.Status, "%s %s: %s", method, path, r.Body)
	}
	seed("POST", "/api/v1/configure", map[string]any{"queue": "q", "namespace": "q", "task": "q"}, http.StatusOK)
	seed("POST", "/api/v1/push", map[string]any{"items": []any{
		map[string]any{"queue": "q", "partition": "p", "transactionId": "t1", "payload": 1},
		map[string]any{"queue": "q", "partition": "p", "transactionId": "t2", "payload": 2}}}, http.StatusCreated)
	seed("GET", "/api/v1/pop/queue/q?batch=1", nil, http.StatusOK)
	seed("GET", "/api/v1/pop/queue/q?batch=1&autoAck=true&consumerGroup=g", nil, http.StatusOK)
	// B must read like missing once A's counts are in the database.
	statusUntil(t, b, a, recent, func(s status) bool { return s.sum().Processed == 1 && s.sum().Ingested == 2 })

	own := probe(a)
	foreign := probe(other)
	for i, p := range paths {
		require.Equal(t, missing[i], foreign[i], "%s: B sees something of A's", p)
		require.NotEqual(t, missing[i], own[i], "%s: A's own call must see its data, or this test proves nothing", p)
	}
}

func TestTenantBSeesNoneOfTenantAsCountersTracesOrTraceNames(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	a, other := b.Token, brokertest.Mint(t, b.Tenant+"-b", auth.Admin)
	window := lastHour()
	probes := []string{
		"/api/v1/status/analytics?interval=minute&" + window,
		"/api/v1/analytics/queue-ops?" + window,
		"/api/v1/analytics/queue-ops?queue=q&" + window,
		"/api/v1/analytics/queue-lag?" + window,
		"/api/v1/analytics/queue-parked-replicas?" + window,
		"/api/v1/analytics/retention?" + window,
		"/api/v1/analytics/worker-metrics?" + window,
		"/api/v1/traces/names",
		"/api/v1/traces/by-name/n",
	}
	probe := func() []string {
		var out []string
		for _, p := range probes {
			r := b.Do(t, "GET", p, other, nil)
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", p, r.Body)
			var v any
			r.JSON(t, &v)
			if m, ok := v.(map[string]any); ok {
				delete(m, "workers") // the cluster's replicas, sampled meanwhile
			}
			body, err := json.Marshal(v)
			require.NoError(t, err)
			out = append(out, string(body))
		}
		return out
	}
	missing := probe()

	r := b.Do(t, "POST", "/api/v1/push", a, map[string]any{"items": []any{
		map[string]any{"queue": "q", "partition": "p", "transactionId": "m0", "payload": 1},
		map[string]any{"queue": "q", "partition": "p", "transactionId": "m1", "payload": 2}}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	pid := array(t, r)[0]["partition_id"]
	if r := b.Do(t, "GET", "/api/v1/pop/queue/q?batch=2&autoAck=true", a, nil); r.Status != http.StatusOK {
		t.Fatalf("A's pop: %d %s", r.Status, r.Body)
	}
	b.Do(t, "GET", "/api/v1/pop/queue/q?wait=true&timeout=1200", a, nil)
	if r := b.Do(t, "POST", "/api/v1/traces", a, map[string]any{"transactionId": "m0", "partitionId": pid, "data": 1, "traceNames": "n"}); r.Status != http.StatusCreated {
		t.Fatalf("A's trace: %d %s", r.Status, r.Body)
	}
	require.NoError(t, b.DB.PutRetentionEvent(t.Context(), dbtest.RetentionEvent{Tenant: b.Tenant, Queue: "q", Kind: "retention", At: time.Now(), Messages: 1}))
	brokertest.Eventually(t, 5*time.Second, func() error { // until A's counts, parked poll included, are flushed
		var o queueOps
		b.Do(t, "GET", "/api/v1/analytics/queue-ops?"+window, a, nil).JSON(t, &o)
		if s := o.totals("q"); s.PopEmpty != 1 || s.PushMessages != 2 {
			return fmt.Errorf("A's counts never reached the database: %+v", o)
		}
		return nil
	})

	foreign := probe()
	for i := range probes {
		require.Equal(t, missing[i], foreign[i], "%s: another tenant's counts and traces must read like none", probes[i])
	}
}
