package streams_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/regent-mq/regent/test/brokertest"
)

// nextAnswer is a cycle's answer with Regent's next batch (next_batch).
type nextAnswer struct {
	cycleAnswer
	StateUpdatedAt string             `json:"state_updated_at"`
	Next           *brokertest.Popped `json:"next"`
}

// cycleNext posts a cycle that asks for the next batch, and requires a 200.
func cycleNext(t testing.TB, b *brokertest.Broker, body map[string]any) nextAnswer {
	t.Helper()
	r := post(t, b, "/streams/v1/cycle", body)
	wantStatus(t, r, 200)
	var a nextAnswer
	r.JSON(t, &a)
	return a
}

// stateUpdatedAt is the updated_at that state/get answers for key.
func (f fixture) stateUpdatedAt(t testing.TB, key string) string {
	t.Helper()
	r := post(t, f.b, "/streams/v1/state/get", map[string]any{"query_id": f.query, "partition_id": f.partition, "keys": []string{key}})
	wantStatus(t, r, 200)
	var out struct {
		Rows []struct {
			UpdatedAt string `json:"updated_at"`
		} `json:"rows"`
	}
	r.JSON(t, &out)
	if len(out.Rows) != 1 {
		t.Fatalf("state/get of %q answered %s", key, r.Body)
	}
	return out.Rows[0].UpdatedAt
}

func upsert(key string, value any) []any {
	return []any{map[string]any{"type": "upsert", "key": key, "value": value}}
}

func TestTheCycleCarriesTheNextBatchUnderANewLeaseOfItsOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 10)
	p := pop(t, f.b, f.src, 4, "")
	a := cycleNext(t, f.b, f.body(map[string]any{"state_ops": upsert("k", 4), "ack": ack(p.LeaseID, "completed", 4), "next_batch": 4}))
	if !a.Success || a.AckResult == nil || a.AckResult.Count != 4 || a.AckResult.LeaseReleased {
		t.Fatalf("answer %+v, want success, count 4 and the lease kept", a.cycleAnswer)
	}
	n := a.Next
	if n == nil || fmt.Sprint(n.Ns()) != "[4 5 6 7]" || n.PartitionID != f.partition || n.Partition != "Default" ||
		n.Queue != f.src || n.ConsumerGroup != "__QUEUE_MODE__" || !n.Success || n.PartitionsClaimed != 1 {
		t.Fatalf("next %+v, want messages 4 to 7 of %s/Default in the pop's answer", n, f.src)
	}
	if n.LeaseID == "" || n.LeaseID == p.LeaseID || n.Messages[0].LeaseID != n.LeaseID {
		t.Fatalf("next batch under lease %q (the acked batch's was %q), want a new one", n.LeaseID, p.LeaseID)
	}
	if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 4 || c.LeaseID != n.LeaseID || c.TotalConsumed != 4 {
		t.Fatalf("cursor %+v, want committed 4 and leased to the next batch", c)
	}
	if got := f.state(t); got["k"] != "4" {
		t.Fatalf("state %v, want k=4", got)
	}

	// The next batch acks as any: the last one brings the rest, then none.
	a = cycleNext(t, f.b, f.body(map[string]any{"ack": ack(n.LeaseID, "completed", 4), "next_batch": 4}))
	if fmt.Sprint(a.Next.Ns()) != "[8 9]" {
		t.Fatalf("next %v, want [8 9]", a.Next.Ns())
	}
	a = cycleNext(t, f.b, f.body(map[string]any{"ack": ack(a.Next.LeaseID, "completed", 2), "next_batch": 4}))
	if !a.Success || a.Next != nil || !a.AckResult.LeaseReleased {
		t.Fatalf("answer %+v with next %v, want the lease released and no next batch", a.cycleAnswer, a.Next)
	}
	if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 10 || c.Leased || c.TotalConsumed != 10 {
		t.Fatalf("cursor %+v, want committed 10 and no lease", c)
	}
}

func TestTheNextBatchAnswerNamesTheUpdatedAtItsStateRowsWereWrittenWith(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 2)
	p := pop(t, f.b, f.src, 1, "")
	a := cycleNext(t, f.b, f.body(map[string]any{"state_ops": upsert("k", 1), "ack": ack(p.LeaseID, "completed", 1), "next_batch": 1}))
	if at := f.stateUpdatedAt(t, "k"); a.StateUpdatedAt != at {
		t.Fatalf("state_updated_at %q, state/get answers %q", a.StateUpdatedAt, at)
	}
	// So the worker that holds the state can name it as it would have read it.
	committed(t, f.b, f.body(map[string]any{"ack": ack(a.Next.LeaseID, "completed", 1), "state_ops": []any{
		map[string]any{"type": "upsert", "key": "k", "value": 2, "if_updated_at": a.StateUpdatedAt}}}))
}

// A cycle whose answer was lost, sent again, names the lease of the batch
// it acked: the new lease is not it, so the repeat is refused and changes
// nothing, as after any committed cycle; it never acks the next batch.
func TestARepeatedCycleWhoseNextBatchWasClaimedIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 6)
	p := pop(t, f.b, f.src, 3, "")
	body := f.body(map[string]any{"state_ops": upsert("k", 3), "push_items": []any{map[string]any{"queue": f.out, "payload": 3}},
		"ack": ack(p.LeaseID, "completed", 3), "next_batch": 3})
	first := cycleNext(t, f.b, body)
	refused(t, f.b, body, "another worker")
	if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 3 || c.LeaseID != first.Next.LeaseID || c.TotalConsumed != 3 {
		t.Fatalf("cursor %+v after the repeat, want committed 3 under the next batch's lease", c)
	}
	if n := sinkMessages(t, f.b, f.out); n != 1 {
		t.Fatalf("%d sink messages after the repeat, want 1", n)
	}
}

func TestNextBatchNeedsASuccessAckOfTheWholeBatchAndABatchSize(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	lease := ack("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "completed", 1)
	for _, c := range []map[string]any{
		{"ack": nil, "next_batch": 1},
		{"ack": ack("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "retry", 1), "next_batch": 1},
		{"ack": lease, "release_lease": false, "next_batch": 1},
		{"ack": lease, "next_batch": 0},
		{"ack": lease, "next_batch": 10001},
		{"ack": lease, "next_batch": "1"},
	} {
		r := post(t, f.b, "/streams/v1/cycle", f.body(c))
		wantStatus(t, r, 400)
		if !strings.Contains(string(r.Body), "next_batch") {
			t.Fatalf("%v: 400 body %s does not name next_batch", c, r.Body)
		}
	}
}

// The lease guard is the seed's: a cycle under an expired lease is refused,
// writes nothing, and claims nothing.
func TestACycleUnderALostLeaseClaimsNoNextBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 6)
	p := pop(t, f.b, f.src, 3, "")
	f.b.ExpireLeases(t, f.src)
	before := f.cursor(t, "__QUEUE_MODE__")
	refused(t, f.b, f.body(map[string]any{"state_ops": upsert("k", 3), "ack": ack(p.LeaseID, "completed", 3), "next_batch": 3}), "expired")
	if c := f.cursor(t, "__QUEUE_MODE__"); c != before {
		t.Fatalf("cursor %+v after the refused cycle, was %+v", c, before)
	}
	if got := f.state(t); len(got) != 0 {
		t.Fatalf("state %v written by the refused cycle", got)
	}
}

func TestACycleOfAnOlderResetGenerationIs409AndClaimsNoNextBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 6)
	p := pop(t, f.b, f.src, 3, "")
	register(t, f.b, "q", "src", "out", "h2", true)
	before := f.cursor(t, "__QUEUE_MODE__")
	r := post(t, f.b, "/streams/v1/cycle", f.body(map[string]any{"reset_generation": 0, "state_ops": upsert("k", 3),
		"ack": ack(p.LeaseID, "completed", 3), "next_batch": 3}))
	wantStatus(t, r, 409)
	if strings.Contains(string(r.Body), `"next"`) {
		t.Fatalf("409 body %s carries a next batch", r.Body)
	}
	if c := f.cursor(t, "__QUEUE_MODE__"); c != before {
		t.Fatalf("cursor %+v after the refused cycle, was %+v", c, before)
	}
}

// The next batch is a pop's: a partition the queue's windowBuffer holds is
// not claimed, and the lease is released.
func TestTheNextBatchKeepsThePopsRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 2)
	p := pop(t, f.b, f.src, 1, "")
	wantStatus(t, post(t, f.b, "/api/v1/configure", map[string]any{"queue": f.src, "options": map[string]any{"windowBuffer": 3600}}), 200)
	f.b.PushN(t, f.src, "", 2, 1)
	a := cycleNext(t, f.b, f.body(map[string]any{"ack": ack(p.LeaseID, "completed", 1), "next_batch": 5}))
	if !a.Success || a.Next != nil || !a.AckResult.LeaseReleased {
		t.Fatalf("answer %+v with next %v, want no next batch while the window buffer holds the partition", a.cycleAnswer, a.Next)
	}
	if c := f.cursor(t, "__QUEUE_MODE__"); c.Committed != 1 || c.Leased {
		t.Fatalf("cursor %+v, want committed 1 and no lease", c)
	}
}

// While the next batch is leased, the partition is not idle: an idle flush
// is deferred, as beside any lease.
func TestAnIdleFlushIsDeferredWhileTheNextBatchIsLeased(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 2)
	p := pop(t, f.b, f.src, 1, "")
	cycleNext(t, f.b, f.body(map[string]any{"state_ops": upsert("k", 1), "ack": ack(p.LeaseID, "completed", 1), "next_batch": 1}))
	a := committed(t, f.b, f.body(map[string]any{"ack": nil, "state_ops": []any{map[string]any{"type": "delete", "key": "k"}}}))
	if !strings.Contains(a.Deferred, "live lease") {
		t.Fatalf("flush answered deferred %q, want deferred for the live lease", a.Deferred)
	}
	if got := f.state(t); got["k"] != "1" {
		t.Fatalf("state %v, want k=1 kept", got)
	}
}
