package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

// The isolation suite: tenant A owns queues, partitions, leases, dead
// letters, a query and its state. Tenant B probes every route with A's ids
// and A's names. Each probe must get exactly the answer a nonexistent object
// gets, and afterwards A's data must be as it was.

type tenantA struct {
	partitionID, leaseID, txID, queryID string
}

const (
	queueName = "orders"
	queryName = "orders.per_minute"
)

// seedTenantA gives A a queue with two messages on partition p1 (one leased,
// one in the dead letter queue), a registered query with state on p1.
func seedTenantA(t *testing.T, b *brokertest.Broker, tok string) tenantA {
	t.Helper()
	must := func(r brokertest.Response, status int) brokertest.Response {
		t.Helper()
		if r.Status != status {
			t.Fatalf("seeding tenant A: status %d, want %d: %s", r.Status, status, r.Body)
		}
		return r
	}
	must(b.Do(t, "POST", "/api/v1/configure", tok, map[string]any{"queue": queueName, "options": map[string]any{"leaseTime": 120}}), 200)
	must(b.Do(t, "POST", "/api/v1/push", tok, map[string]any{"items": []any{
		map[string]any{"queue": queueName, "partition": "p1", "payload": map[string]any{"n": 1}, "transactionId": "a-1"},
		map[string]any{"queue": queueName, "partition": "p1", "payload": map[string]any{"n": 2}, "transactionId": "a-2"},
	}}), 201)
	var pop struct {
		PartitionID string `json:"partitionId"`
		LeaseID     string `json:"leaseId"`
	}
	must(b.Do(t, "GET", "/api/v1/pop/queue/"+queueName+"?batch=1", tok, nil), 200).JSON(t, &pop)
	must(b.Do(t, "POST", "/api/v1/ack", tok, map[string]any{"transactionId": "a-1", "partitionId": pop.PartitionID,
		"leaseId": pop.LeaseID, "status": "dlq", "error": "poison"}), 200)
	must(b.Do(t, "GET", "/api/v1/pop/queue/"+queueName+"?batch=1", tok, nil), 200).JSON(t, &pop)
	var reg struct {
		QueryID string `json:"query_id"`
	}
	must(b.Do(t, "POST", "/streams/v1/queries", tok, map[string]any{"name": queryName, "source_queue": queueName, "config_hash": "h1"}), 200).JSON(t, &reg)
	// An idle flush of a group that never popped the partition: the
	// default group's lease stays held, and a flush of that group would be
	// refused while it is.
	cycle := must(b.Do(t, "POST", "/streams/v1/cycle", tok, map[string]any{"query_id": reg.QueryID, "partition_id": pop.PartitionID,
		"consumer_group": "streams." + queryName,
		"state_ops":      []any{map[string]any{"type": "upsert", "key": "k", "value": map[string]any{"acc": 1}}}, "ack": nil}), 200)
	if !strings.Contains(string(cycle.Body), `"success":true`) {
		t.Fatalf("seeding tenant A: cycle %s", cycle.Body)
	}
	return tenantA{partitionID: pop.PartitionID, leaseID: pop.LeaseID, txID: "a-2", queryID: reg.QueryID}
}

// snapshot is A's data as the database holds it.
func snapshot(t *testing.T, b *brokertest.Broker) string {
	t.Helper()
	s, err := b.DB.Dump(t.Context(), b.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTenantBCannotReadModifyAckLeasePopOrDetectTenantAsObjects(t *testing.T) {
	b := tenants.Shared(t) // b's tenant is A
	tokA, tenantB := b.Token, b.Tenant+"-b"
	tokB := brokertest.Mint(t, tenantB, auth.Admin)
	b.Grant(t, b.Tenant, nil)
	b.Grant(t, tenantB, nil)
	a := seedTenantA(t, b, tokA)
	if r := b.Do(t, "POST", "/api/v1/traces", tokA, map[string]any{"transactionId": a.txID, "partitionId": a.partitionID,
		"data": map[string]any{"step": 1}, "traceNames": "a-trace"}); r.Status != 201 {
		t.Fatalf("seeding tenant A: trace = %d %s", r.Status, r.Body)
	}
	now := time.Now().UTC().Truncate(time.Minute)
	window := "&from=" + now.Add(-time.Hour).Format(time.RFC3339) + "&to=" + now.Add(time.Hour).Format(time.RFC3339)
	// The analytics probes below must meet A's counts: wait for their flush,
	// the last seeded (the second pop, the cycle) included.
	brokertest.Eventually(t, 10*time.Second, func() error {
		var ops struct {
			Series []struct {
				PushMessages int `json:"pushMessages"`
				PopMessages  int `json:"popMessages"`
			} `json:"series"`
		}
		b.Do(t, "GET", "/api/v1/analytics/queue-ops?queue="+queueName+window, tokA, nil).JSON(t, &ops)
		var cycles struct {
			Series []struct {
				Cycles int `json:"cycles"`
			} `json:"series"`
		}
		b.Do(t, "GET", "/api/v1/analytics/query-cycles?queryId="+a.queryID+window, tokA, nil).JSON(t, &cycles)
		pushed, popped, cycled := 0, 0, 0
		for _, s := range ops.Series {
			pushed, popped = pushed+s.PushMessages, popped+s.PopMessages
		}
		for _, s := range cycles.Series {
			cycled += s.Cycles
		}
		if pushed != 2 || popped != 2 || cycled != 1 {
			return fmt.Errorf("A's counters are not all flushed yet: %d pushed, %d popped, %d cycles", pushed, popped, cycled)
		}
		return nil
	})
	// A's history, as the backlog refresh and the cycle counters write it.
	if err := b.DB.PutGroupMinute(t.Context(), dbtest.GroupMinute{Tenant: b.Tenant, Queue: queueName, Group: "g", Minute: now, Lag: 5, LagSeconds: 30}); err != nil {
		t.Fatal(err)
	}
	if err := b.DB.PutQueryMinute(t.Context(), dbtest.QueryMinute{Tenant: b.Tenant, QueryID: a.queryID, Minute: now, Replica: "r", Cycles: 4, Refused: 1}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, b)
	missing := uuid.Must(uuid.NewV7()).String()

	// Each probe is sent twice by B: once with A's id, once with an id that
	// exists nowhere. After the nonexistent id is replaced by A's in its
	// answer, the two answers must be identical.
	probes := []struct {
		name   string
		method string
		path   func(id string) string
		body   func(id string) any
		id     string // A's id that the probe aims at
		fresh  string // a top-level field the broker makes anew for each call
	}{
		// The analytics first: B's own requests below count in B's
		// minutes, under A's names and the nonexistent ones alike, and a
		// flush between the two reads of a pair would tell them apart.
		{"operations of A's queue", "GET", func(id string) string { return "/api/v1/analytics/queue-ops?queue=" + id + window }, nil, queueName, ""},
		{"lag history of A's queue", "GET", func(id string) string { return "/api/v1/analytics/group-lag?queue=" + id + window }, nil, queueName, ""},
		{"cycle history of A's query", "GET", func(id string) string { return "/api/v1/analytics/query-cycles?queryId=" + id + window }, nil, a.queryID, ""},
		{"pop lag of A's queue", "GET", func(id string) string { return "/api/v1/analytics/queue-lag?queue=" + id + window }, nil, queueName, ""},
		{"stored messages of A's queue", "GET", func(id string) string { return "/api/v1/status/analytics?interval=minute&queue=" + id + window }, nil, queueName, ""},
		{"pop A's queue by name", "GET", func(id string) string { return "/api/v1/pop/queue/" + id + "?batch=10" }, nil, queueName, ""},
		{"pop A's partition by name", "GET", func(id string) string { return "/api/v1/pop/queue/" + id + "/partition/p1?batch=10" }, nil, queueName, ""},
		{"pop A's queue as a named group", "GET", func(id string) string { return "/api/v1/pop/queue/" + id + "?consumerGroup=g" }, nil, queueName, ""},
		{"ack on A's partition", "POST", func(string) string { return "/api/v1/ack" },
			func(id string) any { return map[string]any{"transactionId": a.txID, "partitionId": id} }, a.partitionID, ""},
		{"ack with A's lease", "POST", func(string) string { return "/api/v1/ack" },
			func(id string) any {
				return map[string]any{"transactionId": a.txID, "partitionId": a.partitionID, "leaseId": id}
			}, a.leaseID, ""},
		{"nack on A's partition", "POST", func(string) string { return "/api/v1/ack" },
			func(id string) any {
				return map[string]any{"transactionId": a.txID, "partitionId": id, "status": "failed"}
			}, a.partitionID, ""},
		{"ack batch on A's partition", "POST", func(string) string { return "/api/v1/ack/batch" },
			func(id string) any {
				return map[string]any{"acknowledgments": []any{map[string]any{"transactionId": a.txID, "partitionId": id}}}
			}, a.partitionID, ""},
		{"extend A's lease", "POST", func(id string) string { return "/api/v1/lease/" + id + "/extend" },
			func(string) any { return map[string]any{"seconds": 3600} }, a.leaseID, ""},
		{"transaction acking on A's partition", "POST", func(string) string { return "/api/v1/transaction" },
			func(id string) any {
				return map[string]any{"operations": []any{map[string]any{"type": "ack", "transactionId": a.txID, "partitionId": id}}}
			}, a.partitionID, "transactionId"},
		{"trace on A's message", "POST", func(string) string { return "/api/v1/traces" },
			func(id string) any {
				return map[string]any{"transactionId": a.txID, "partitionId": id, "data": map[string]any{}}
			}, a.partitionID, ""},
		{"traces of A's message", "GET", func(id string) string { return "/api/v1/traces/" + id + "/" + a.txID }, nil, a.partitionID, ""},
		{"traces by A's trace name", "GET", func(id string) string { return "/api/v1/traces/by-name/" + id }, nil, "a-trace", ""},
		{"dead letters of A's queue", "GET", func(id string) string { return "/api/v1/dlq?queue=" + id }, nil, queueName, ""},
		{"A's message", "GET", func(id string) string { return "/api/v1/messages/" + id + "/" + a.txID }, nil, a.partitionID, ""},
		{"delete A's message", "DELETE", func(id string) string { return "/api/v1/messages/" + id + "/" + a.txID }, nil, a.partitionID, ""},
		{"messages of A's queue", "GET", func(id string) string { return "/api/v1/messages?queue=" + id }, nil, queueName, ""},
		{"messages of A's namespace", "GET", func(id string) string { return "/api/v1/messages?ns=" + id }, nil, queueName, ""},
		{"A's queue's messages", "GET", func(id string) string { return "/api/v1/status/queues/" + id + "/messages" }, nil, queueName, ""},
		{"A's queue's resources", "GET", func(id string) string { return "/api/v1/resources/queues/" + id }, nil, queueName, ""},
		{"A's queue's status", "GET", func(id string) string { return "/api/v1/status/queues/" + id }, nil, queueName, ""},
		{"status of A's queue", "GET", func(id string) string {
			return "/api/v1/status?from=2000-01-01T00:00:00Z&to=2000-01-01T01:00:00Z&queue=" + id
		}, nil, queueName, "workers"},
		{"state of A's partition", "POST", func(string) string { return "/streams/v1/state/get" },
			func(id string) any { return map[string]any{"query_id": a.queryID, "partition_id": id} }, a.partitionID, ""},
		{"state of A's query", "POST", func(string) string { return "/streams/v1/state/get" },
			func(id string) any { return map[string]any{"query_id": id, "partition_id": missing} }, a.queryID, ""},
		{"cycle on A's partition", "POST", func(string) string { return "/streams/v1/cycle" },
			func(id string) any {
				return map[string]any{"query_id": a.queryID, "partition_id": id,
					"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 666}}, "ack": nil}
			}, a.partitionID, ""},
		{"cycle on A's partition with A's lease", "POST", func(string) string { return "/streams/v1/cycle" },
			func(id string) any {
				return map[string]any{"query_id": a.queryID, "partition_id": id,
					"ack": map[string]any{"transactionId": a.txID, "leaseId": a.leaseID, "status": "completed", "count": 1}}
			}, a.partitionID, ""},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			var body, control any
			if p.body != nil {
				body, control = p.body(p.id), p.body(missing)
			}
			foreign := b.Do(t, p.method, p.path(p.id), tokB, body)
			nothing := b.Do(t, p.method, p.path(missing), tokB, control)
			if foreign.Status != nothing.Status {
				t.Fatalf("A's object answers %d %s, a nonexistent one %d %s", foreign.Status, foreign.Body, nothing.Status, nothing.Body)
			}
			want := withoutField(t, strings.ReplaceAll(string(nothing.Body), missing, p.id), p.fresh)
			if got := withoutField(t, string(foreign.Body), p.fresh); got != want {
				t.Fatalf("B can tell A's object from a nonexistent one:\nA's:         %s\nnonexistent: %s", got, want)
			}
		})
	}

	// Reusing A's names only ever reaches B's own objects.
	t.Run("configure, push, register and delete under A's names", func(t *testing.T) {
		r := b.Do(t, "POST", "/api/v1/configure", tokB, map[string]any{"queue": queueName, "options": map[string]any{"leaseTime": 5}})
		if r.Status != 200 {
			t.Fatalf("configure = %d %s", r.Status, r.Body)
		}
		r = b.Do(t, "POST", "/api/v1/push", tokB, map[string]any{"items": []any{
			map[string]any{"queue": queueName, "partition": "p1", "payload": "b", "transactionId": a.txID}}})
		if r.Status != 201 || !strings.Contains(string(r.Body), `"status":"queued"`) {
			t.Fatalf("B's push of A's transaction id into A's queue name = %d %s, want queued in B's own queue", r.Status, r.Body)
		}
		r = b.Do(t, "POST", "/streams/v1/queries", tokB, map[string]any{"name": queryName, "source_queue": queueName, "config_hash": "other"})
		if r.Status != 200 || r.Map(t)["fresh"] != true || r.Map(t)["query_id"] == a.queryID {
			t.Fatalf("B's registration of A's query name = %d %s, want a fresh query of B's own", r.Status, r.Body)
		}
		r = b.Do(t, "POST", "/api/v1/transaction", tokB, map[string]any{"operations": []any{
			map[string]any{"type": "push", "items": []any{map[string]any{"queue": queueName, "partition": "p1", "payload": "b2"}}}}})
		if r.Status != 200 || r.Map(t)["success"] != true {
			t.Fatalf("B's transactional push = %d %s", r.Status, r.Body)
		}
		var pop struct {
			Messages []struct {
				Data any `json:"data"`
			} `json:"messages"`
		}
		b.Do(t, "GET", "/api/v1/pop/queue/"+queueName+"?batch=10&consumerGroup=b-reader", tokB, nil).JSON(t, &pop)
		if len(pop.Messages) != 2 || pop.Messages[0].Data != "b" || pop.Messages[1].Data != "b2" {
			t.Fatalf("B pops %+v from its queue, want exactly its own two messages", pop.Messages)
		}
		r = b.Do(t, "DELETE", "/api/v1/resources/queues/"+queueName, tokB, nil)
		if r.Status != 200 || r.Map(t)["existed"] != true {
			t.Fatalf("B's delete = %d %s", r.Status, r.Body)
		}
	})

	if after := snapshot(t, b); after != before {
		t.Fatalf("tenant B changed tenant A's data:\nbefore: %s\nafter:  %s", before, after)
	}
	// And A still sees all of it.
	r := b.Do(t, "POST", "/streams/v1/state/get", tokA, map[string]any{"query_id": a.queryID, "partition_id": a.partitionID})
	if !strings.Contains(string(r.Body), `"key":"k"`) {
		t.Fatalf("A's state read after B's probes = %d %s", r.Status, r.Body)
	}
}

// withoutField removes a top-level field from a JSON object body.
func withoutField(t *testing.T, body, field string) string {
	t.Helper()
	if field == "" {
		return body
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("answer is not a JSON object: %s", body)
	}
	delete(m, field)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// With tenancy on, a caller with no token reaches only the public routes
// on the API port, and none of them names a tenant's queue, group, trace
// or query: the metrics, whose labels do, live on a listener of their own
// (queue-admin-api.md §10). The probes cover every route of the table.
func TestNothingOnTheAPIPortWithoutATokenNamesATenant(t *testing.T) {
	b := tenants.Shared(t)
	tokA := b.Token
	b.Grant(t, b.Tenant, nil)
	seedTenantA(t, b, tokA)
	if r := b.Do(t, "POST", "/api/v1/traces", tokA, map[string]any{"transactionId": "a-2", "partitionId": "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f",
		"traceNames": []string{"orders-trace"}, "data": map[string]any{}}); r.Status >= 500 {
		t.Fatalf("seeding a trace: %d %s", r.Status, r.Body)
	}
	if m := b.Scrape(t); !strings.Contains(m, `queue="`+queueName+`"`) {
		t.Fatalf("the metrics listener does not name A's queue, so this test would prove nothing:\n%.2000s", m)
	}
	secrets := []string{queueName, queryName, "streams." + queryName, "orders-trace"}
	probes := [][2]string{{"GET", "/"}}
	for _, c := range contract {
		probes = append(probes, [2]string{c.method, c.probe})
	}
	for _, p := range probes {
		r := b.Do(t, p[0], p[1], brokertest.NoToken, nil)
		for _, s := range secrets {
			if strings.Contains(string(r.Body), s) {
				t.Errorf("%s %s without a token = %d and names %q: %.300s", p[0], p[1], r.Status, s, r.Body)
			}
		}
	}
}
