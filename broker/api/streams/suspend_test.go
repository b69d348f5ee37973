package streams_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/pg/celldb"
)

// suspend sets the fixture's query "q" suspended or not, as the operator
// does for spec.suspend.
func (f fixture) suspend(t testing.TB, suspended bool) {
	t.Helper()
	found, err := celldb.New(f.b.Pool).Suspend(t.Context(), f.b.Tenant, f.b.Q("q"), f.group, suspended)
	if err != nil || !found {
		t.Fatalf("suspend found query q: %v, %v", found, err)
	}
}

func (f fixture) leased(t testing.TB, group string) bool {
	t.Helper()
	for _, c := range f.b.Cursors(t, f.src) {
		if c.Partition == "Default" && c.Group == group && c.LeaseID != nil {
			return true
		}
	}
	return false
}

func TestASuspendedQueryPopsNothingAndTakesNoLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 5)
	f.suspend(t, true)

	if p := pop(t, f.b, f.src, 10, "consumerGroup="+f.group); p != nil {
		t.Fatalf("the suspended query's group brokertest.Popped %v", p.Ns())
	}
	r := f.b.Do(t, "GET", "/api/v1/pop/queue/"+f.src+"?batch=10&consumerGroup="+f.group, "", nil)
	wantStatus(t, r, 204)
	if f.leased(t, f.group) {
		t.Fatal("a pop of the suspended query's group took a lease")
	}
	// Other groups of the source are not the query's.
	if p := pop(t, f.b, f.src, 10, "consumerGroup=other"); p == nil || len(p.Messages) != 5 {
		t.Fatalf("group other brokertest.Popped %v, want the 5 messages", p)
	}

	// Resuming wakes a pop parked meanwhile, and it starts where the
	// cursor stood: at the first message.
	parked := parkedPop(f.b, f.src, "consumerGroup="+f.group+"&batch=10")
	f.b.WaitParked(t, 1) // it must not answer before the resume
	f.suspend(t, false)
	select {
	case p := <-parked:
		if p == nil || fmt.Sprint(p.Ns()) != "[0 1 2 3 4]" {
			t.Fatalf("the parked pop answered %v after the resume, want [0 1 2 3 4]", p)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the parked pop was not woken by the resume")
	}
}

func TestASuspendedQueryCyclesAreRefusedWithQuerySuspended(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 5)
	p := pop(t, f.b, f.src, 3, "consumerGroup="+f.group)
	f.suspend(t, true)

	body := f.body(map[string]any{"consumer_group": f.group,
		"state_ops":  []map[string]any{{"type": "upsert", "key": "k", "value": map[string]any{"n": 3}}},
		"push_items": []map[string]any{{"queue": f.out, "payload": map[string]any{"n": 3}}},
		"ack":        ack(p.LeaseID, "completed", 3)})
	refused(t, f.b, body, "query suspended")
	refused(t, f.b, f.body(map[string]any{"consumer_group": f.group,
		"state_ops": []map[string]any{{"type": "upsert", "key": "idle", "value": 1}}}), "query suspended")
	if s := f.state(t); len(s) != 0 {
		t.Fatalf("state %v written by a refused cycle", s)
	}
	if c := f.cursor(t, f.group); c.Committed != 0 || c.LeaseID != p.LeaseID {
		t.Fatalf("cursor %+v moved under a suspended query", c)
	}
	if n := sinkMessages(t, f.b, f.out); n != 0 {
		t.Fatalf("%d sink messages stored by a refused cycle", n)
	}

	// Resumed, the same cycle commits: the lease and the cursor are as the
	// suspension found them.
	f.suspend(t, false)
	committed(t, f.b, body)
	if c := f.cursor(t, f.group); c.Committed != 3 || c.Leased {
		t.Fatalf("cursor %+v after the resumed cycle, want committed 3, no lease", c)
	}
	if got := pop(t, f.b, f.src, 10, "consumerGroup="+f.group).Ns(); fmt.Sprint(got) != "[3 4]" {
		t.Fatalf("next pop %v, want [3 4]", got)
	}
}

func TestSuspendingAnUnknownQueryFindsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if found, err := celldb.New(f.b.Pool).Suspend(t.Context(), f.b.Tenant, f.b.Q("absent"), "streams.absent", true); err != nil || found {
		t.Fatalf("query_suspend of an unknown query = %v, %v; want false", found, err)
	}
}

func TestRegisteringASuspendedQueryAgainLeavesItSuspended(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.suspend(t, true)
	if r := register(t, f.b, "q", "src", "out", "h", false); r.QueryID != f.query {
		t.Fatalf("re-registration answered query %s, want %s", r.QueryID, f.query)
	}
	if !f.b.StreamQuery(t, f.query).Suspended {
		t.Fatal("a re-registration resumed the suspended query")
	}
}

func TestARewindRefusesTheCycleOfABatchLeasedBeforeIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 5)
	p := pop(t, f.b, f.src, 5, "consumerGroup="+f.group)
	// To the beginning of time: every message.
	if rw, err := celldb.New(f.b.Pool).Rewind(t.Context(), f.b.Tenant, f.b.Q("q"), f.group, "r1", time.Time{}); err != nil || rw.Already {
		t.Fatalf("rewind %+v, %v; want rewound", rw, err)
	}
	// The worker folded the batch from the state it read before the rewind.
	refused(t, f.b, f.body(map[string]any{"consumer_group": f.group,
		"state_ops": []map[string]any{{"type": "upsert", "key": "k", "value": map[string]any{"n": 5}}},
		"ack":       ack(p.LeaseID, "completed", 5)}), "invalid lease")
	if s := f.state(t); len(s) != 0 {
		t.Fatalf("state %v written from before the rewind", s)
	}
	if got := pop(t, f.b, f.src, 10, "consumerGroup="+f.group).Ns(); fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Fatalf("the pop after the rewind got %v, want the whole batch again", got)
	}
}
