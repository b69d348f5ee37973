package streams_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/pg/celldb"
)

func TestQueryListingIsAnEmptyArrayWithoutQueries(t *testing.T) {
	t.Parallel()
	b := alone(t)
	if r := b.Do(t, "GET", "/streams/v1/queries", "", nil); string(r.Body) != `{"queries":[]}` {
		t.Fatalf("GET /streams/v1/queries = %d %s, want {\"queries\":[]}", r.Status, r.Body)
	}
}

// The listing says what the operator's StreamQuery status says (lag, state
// rows, last cycle), per source partition too, so that the console's
// state browser can address each shard.
func TestQueryListingShowsEachQuerysProgressAndSourcePartitions(t *testing.T) {
	t.Parallel()
	b := alone(t)
	sink := register(t, b, "with-sink", "src", "out", "h1", false)
	register(t, b, "idle", "other", "", "h2", false)
	pid := sourcePartition(t, b, "src")
	var items []any
	for i := range 3 {
		items = append(items, map[string]any{"queue": b.Q("src"), "payload": map[string]any{"n": i}})
	}
	wantStatus(t, b.Do(t, "POST", "/api/v1/push", "", map[string]any{"items": items}), 201)
	p := pop(t, b, b.Q("src"), 2, "consumerGroup=streams."+b.Q("with-sink"))
	committed(t, b, map[string]any{"query_id": sink.QueryID, "partition_id": pid,
		"state_ops":      []any{map[string]any{"type": "upsert", "key": "w1", "value": map[string]any{"windowEnd": 1000, "sum": 3}}},
		"consumer_group": "streams." + b.Q("with-sink"),
		"ack":            map[string]any{"leaseId": p.LeaseID, "status": "completed", "count": 2}})

	qs := b.Queries(t, "")
	if len(qs) != 2 || qs[0].Name != b.Q("idle") || qs[1].Name != b.Q("with-sink") {
		t.Fatalf("queries %+v, want idle and with-sink, by name", qs)
	}
	idle, q := qs[0], qs[1]
	if idle.SinkQueue != nil || idle.LastCycle != nil || idle.StateRows != 0 || len(idle.Partitions) != 0 {
		t.Errorf("the idle query on a queue that does not exist: %+v", idle)
	}
	if q.ID != sink.QueryID || q.SourceQueue != b.Q("src") || q.SinkQueue == nil || *q.SinkQueue != b.Q("out") || q.ConfigHash != "h1" {
		t.Errorf("with-sink listed as %+v", q)
	}
	if q.Lag != 1 || q.StateRows != 1 || q.LastCycle == nil {
		t.Errorf("with-sink after a cycle over 2 of 3 messages: lag %d, state rows %d, last cycle %v; want 1, 1, a time",
			q.Lag, q.StateRows, q.LastCycle)
	}
	if len(q.Partitions) != 1 || q.Partitions[0].ID != pid || q.Partitions[0].Name != "Default" ||
		q.Partitions[0].Lag != 1 || q.Partitions[0].StateRows != 1 {
		t.Errorf("with-sink's partitions %+v, want Default (%s) with lag 1 and 1 state row", q.Partitions, pid)
	}
}

// With tenancy on, each tenant lists its own queries only, even under the
// same name.
func TestQueryListingShowsOnlyTheCallersTenant(t *testing.T) {
	t.Parallel()
	ts := twoTenants(t)
	grant(t, ts.b, ts.redTenant, nil)
	red := queryAs(t, ts.b, ts.red)
	blue := queryAs(t, ts.b, ts.blue)
	for token, want := range map[string]string{ts.red: red, ts.blue: blue} {
		qs := ts.b.Queries(t, token)
		if got := fmt.Sprint(len(qs)); got != "1" || qs[0].ID != want {
			t.Errorf("listing %+v, want only query %s", qs, want)
		}
	}
}

// The listing spells its fields as the three POST routes do, snake_case:
// the query_id and partition_id it lists are what state/get and cycle take
// under those names.
func TestQueryListingNamesItsFieldsInSnakeCaseAsThePostRoutesDo(t *testing.T) {
	t.Parallel()
	b := alone(t)
	register(t, b, "snake", "src", "out", "h1", false)
	sourcePartition(t, b, "src")
	var l struct {
		Queries []map[string]any `json:"queries"`
	}
	r := b.Do(t, "GET", "/streams/v1/queries", "", nil)
	wantStatus(t, r, 200)
	r.JSON(t, &l)
	if len(l.Queries) != 1 {
		t.Fatalf("queries %s, want one", r.Body)
	}
	q := l.Queries[0]
	want := []string{"query_id", "name", "source_queue", "sink_queue", "config_hash", "reset_generation",
		"created_at", "updated_at", "lag", "state_rows", "last_cycle", "suspended", "last_rewind", "partitions", "sink_table"}
	if len(q) != len(want) {
		t.Errorf("query fields %v, want exactly %v", keys(q), want)
	}
	for _, k := range want {
		if _, ok := q[k]; !ok {
			t.Errorf("query %v has no %q", keys(q), k)
		}
	}
	parts, _ := q["partitions"].([]any)
	if len(parts) != 1 {
		t.Fatalf("partitions %v, want one", q["partitions"])
	}
	p, _ := parts[0].(map[string]any)
	wantPart := []string{"partition_id", "name", "lag", "state_rows"}
	if len(p) != len(wantPart) {
		t.Errorf("partition fields %v, want exactly %v", keys(p), wantPart)
	}
	for _, k := range wantPart {
		if _, ok := p[k]; !ok {
			t.Errorf("partition %v has no %q", keys(p), k)
		}
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The listing shows the Kubernetes side of a query that the broker knows,
// as the operator applied it: spec.suspend, and the last rewind (to when,
// at what time, over how many source partitions).
func TestQueryListingShowsTheSuspensionAndTheLastRewind(t *testing.T) {
	t.Parallel()
	b := alone(t)
	register(t, b, "kube", "src", "", "h1", false)
	b.PushN(t, b.Q("src"), "", 0, 1)
	wantStatus(t, b.Do(t, "GET", "/api/v1/pop/queue/"+b.Q("src")+"?batch=1&autoAck=true&consumerGroup=streams."+b.Q("kube"), "", nil), 200)
	if q := b.Query(t, "", b.Q("kube")); q.Suspended || q.LastRewind != nil {
		t.Fatalf("a new query listed as suspended %v, last rewind %+v", q.Suspended, q.LastRewind)
	}
	cell := celldb.New(b.Pool)
	if found, err := cell.Suspend(t.Context(), b.Tenant, b.Q("kube"), "streams."+b.Q("kube"), true); err != nil || !found {
		t.Fatalf("suspend found query kube: %v, %v", found, err)
	}
	to := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	if rw, err := cell.Rewind(t.Context(), b.Tenant, b.Q("kube"), "streams."+b.Q("kube"), "r1", to); err != nil || rw.Already {
		t.Fatalf("rewind %+v, %v; want rewound", rw, err)
	}
	q := b.Query(t, "", b.Q("kube"))
	if !q.Suspended || q.LastRewind == nil || q.LastRewind.To == nil || !q.LastRewind.To.Equal(to) ||
		q.LastRewind.At.IsZero() || q.LastRewind.Partitions != 1 {
		t.Fatalf("after a suspension and a rewind to %s over 1 partition: suspended %v, last rewind %+v", to, q.Suspended, q.LastRewind)
	}
}
