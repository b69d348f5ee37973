package streams_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/test/brokertest"
)

// The rules that keep an idle flush (a cycle with "ack": null) beside folds
// exactly-once; queen_streams.cycle_rules.s file says why each is needed, and
// test/flushrace runs workers that need them.

// drained pushes n messages to src, pops them all and acks them in a cycle:
// the partition is idle, with no lease held.
func (f fixture) drained(t *testing.T, n int) {
	t.Helper()
	f.b.PushN(t, f.src, "", 0, n)
	p := pop(t, f.b, f.src, n, "")
	committed(t, f.b, f.body(map[string]any{"ack": ack(p.LeaseID, "completed", n)}))
}

// flushBody is an idle flush that writes state key k and emits one message.
func (f fixture) flushBody(ops ...any) map[string]any {
	if ops == nil {
		ops = []any{map[string]any{"type": "upsert", "key": "k", "value": 1}}
	}
	return f.body(map[string]any{"ack": nil, "release_lease": true, "state_ops": ops,
		"push_items": []any{map[string]any{"queue": f.out, "payload": 1}}})
}

func TestCycleIdleFlushOnAnIdlePartitionCommitsAndDoesNoLeaseWork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.drained(t, 5)
	before := f.cursor(t, "__QUEUE_MODE__")
	a := committed(t, f.b, f.flushBody())
	if a.AckResult != nil {
		t.Fatalf("an idle-flush cycle answered ack_result %+v", a.AckResult)
	}
	if after := f.cursor(t, "__QUEUE_MODE__"); after != before {
		t.Fatalf("cursor %+v after ack: null, want %+v", after, before)
	}
	if got := f.state(t); got["k"] != "1" || sinkMessages(t, f.b, f.out) != 1 {
		t.Fatalf("the flush did not apply: state %v", got)
	}
}

// deferred requires an idle flush answered as a success that applied
// nothing, whose deferred field contains want.
func deferred(t testing.TB, b *brokertest.Broker, body map[string]any, want string) {
	t.Helper()
	a := cycle(t, b, body)
	if !a.Success || a.Error != "" || !strings.Contains(a.Deferred, want) || a.StateOpsApplied != 0 ||
		a.PushResults == nil || len(a.PushResults) != 0 || a.AckResult != nil {
		t.Fatalf("the flush answered %+v, want success, nothing applied, and deferred saying %q", a, want)
	}
}

func TestCycleIdleFlushIsDeferredWhileAWorkerHoldsALiveLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 5)
	pop(t, f.b, f.src, 5, "")
	before := f.cursor(t, "__QUEUE_MODE__")
	deferred(t, f.b, f.flushBody(), "a worker holds a live lease on this partition for consumer group __QUEUE_MODE__")
	f.wantNothingWritten(t, f.out, before)
}

func TestCycleIdleFlushIsDeferredWhileThePartitionHoldsUnacknowledgedMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.drained(t, 3)
	f.b.PushN(t, f.src, "", 3, 1)
	before := f.cursor(t, "__QUEUE_MODE__")
	deferred(t, f.b, f.flushBody(), "the partition holds messages consumer group __QUEUE_MODE__ has not acknowledged")
	f.wantNothingWritten(t, f.out, before)
}

func TestCycleIdleFlushOfAPartitionTheGroupNeverPoppedCommits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 2)
	committed(t, f.b, f.body(map[string]any{"ack": nil, "consumer_group": "never-brokertest.Popped",
		"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}}}))
}

func TestCycleIdleFlushIsDeferredWhenARowItRemovesIsGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.drained(t, 1)
	before := f.cursor(t, "__QUEUE_MODE__")
	deferred(t, f.b, f.flushBody(map[string]any{"type": "delete", "key": "w\u001f1"}),
		`key "w\u001f1" that the flush deletes is already gone`)
	f.wantNothingWritten(t, f.out, before)

	// A row the same flush wrote first is its own to remove.
	committed(t, f.b, f.flushBody(
		map[string]any{"type": "upsert", "key": "w", "value": 1},
		map[string]any{"type": "delete", "key": "w"}))
}

// read is a state/get of the fixture's query and partition with filter, by
// the caller of token ("" the default one): the rows' keys and updated_at.
func (f fixture) read(t *testing.T, token string, filter map[string]any) (rows []struct{ Key, UpdatedAt string }) {
	t.Helper()
	filter["query_id"], filter["partition_id"] = f.query, f.partition
	r := f.b.Do(t, "POST", "/streams/v1/state/get", token, filter)
	wantStatus(t, r, 200)
	var out struct {
		Rows []struct {
			Key       string `json:"key"`
			UpdatedAt string `json:"updated_at"`
		} `json:"rows"`
	}
	r.JSON(t, &out)
	for _, row := range out.Rows {
		rows = append(rows, struct{ Key, UpdatedAt string }{row.Key, row.UpdatedAt})
	}
	return rows
}

// ripeRead is a flush's read of the windows ripe at ripe, as the stock
// workers send it, by the caller of token: how many rows it returned.
func (f fixture) ripeRead(t *testing.T, token string, ripe int64) int {
	t.Helper()
	return len(f.read(t, token, map[string]any{"keys": []string{}, "key_prefix": "w", "ripe_at_or_before": ripe}))
}

// fold pops the n-th message pushed to the fixture's source and commits a
// fold of it into window w1 (n events, ripe at 1000).
func (f fixture) fold(t *testing.T, n int) {
	t.Helper()
	f.b.PushN(t, f.src, "", n-1, 1)
	p := pop(t, f.b, f.src, 1, "")
	committed(t, f.b, f.body(map[string]any{"ack": ack(p.LeaseID, "completed", 1), "state_ops": []any{
		map[string]any{"type": "upsert", "key": "w1", "value": map[string]any{"windowEnd": 1000, "n": n}}}}))
}

// stockFlush is a stock worker's flush of window w1 as it read it, with n
// events: no if_updated_at, no transaction id.
func (f fixture) stockFlush(n int) map[string]any {
	return f.body(map[string]any{"ack": nil, "state_ops": []any{map[string]any{"type": "delete", "key": "w1"}},
		"push_items": []any{map[string]any{"queue": f.out, "payload": map[string]any{"n": n}}}})
}

// The interleaving of issue 37, through the routes: a stock flush reads a
// ripe window, a fold adds an event to it, and the flush, which would emit
// the window without the event and delete it, is deferred. Its next read
// returns the fold's window, which it then emits.
func TestCycleIdleFlushIsDeferredWhenARowItRemovesChangedSinceARipeReadReturnedIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.fold(t, 1)
	if got := f.ripeRead(t, "", 1000); got != 1 {
		t.Fatalf("the ripe read returned %d rows, want w1", got)
	}
	f.fold(t, 2)
	deferred(t, f.b, f.stockFlush(1), `key "w1" changed since a ripe read returned it`)
	if got := f.state(t)["w1"]; got != `{"n": 2, "windowEnd": 1000}` || sinkMessages(t, f.b, f.out) != 0 {
		t.Fatalf("the deferred flush left w1 = %s and emitted %d", got, sinkMessages(t, f.b, f.out))
	}

	f.ripeRead(t, "", 1000)
	committed(t, f.b, f.stockFlush(2))
	if got := f.state(t); len(got) != 0 || sinkMessages(t, f.b, f.out) != 1 {
		t.Fatalf("the flush after a new read left %v and emitted %d", got, sinkMessages(t, f.b, f.out))
	}
}

// A read-only caller cannot flush, so its ripe read vouches for no flush:
// the flush that read before the fold is still deferred after it.
func TestARipeReadByAReadOnlyCallerVouchesForNoFlush(t *testing.T) {
	t.Parallel()
	b := alone(t)
	b.Token = brokertest.Mint(t, b.Tenant, auth.ReadWrite)
	f := fixtureOn(t, b)
	f.fold(t, 1)
	f.ripeRead(t, "", 1000)
	f.fold(t, 2)
	if got := f.ripeRead(t, brokertest.Mint(t, b.Tenant, auth.ReadOnly), 1000); got != 1 {
		t.Fatalf("the read-only ripe read returned %d rows, want w1", got)
	}
	deferred(t, f.b, f.stockFlush(1), `key "w1" changed since a ripe read returned it`)
}

// A worker that sends if_updated_at asked to be told: its failed
// precondition is a refusal even when the flush would also be deferred.
func TestCycleIdleFlushWithAFailedPreconditionIsRefusedNotDeferred(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	committed(t, f.b, f.body(map[string]any{"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}}}))
	read := f.readAt(t, "k")
	committed(t, f.b, f.body(map[string]any{"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 2}}}))
	f.moved(t, "k", read)
	f.b.PushN(t, f.src, "", 0, 1)
	pop(t, f.b, f.src, 1, "")
	refused(t, f.b, f.flushBody(map[string]any{"type": "delete", "key": "k", "if_updated_at": read}),
		`stale state: key "k" changed or was deleted since it was read`)
}

func TestIdleFlushDeferralsAreCountedByReasonNotAsRefusals(t *testing.T) {
	t.Parallel()
	// The figures are the tenant's: the test is a tenant of its own.
	f := fixtureOn(t, alone(t))
	f.drained(t, 1)
	deferred(t, f.b, f.flushBody(map[string]any{"type": "delete", "key": "gone"}), "already gone")
	f.b.PushN(t, f.src, "", 1, 1)
	deferred(t, f.b, f.flushBody(), "not acknowledged")
	waitForMetric(t, f.b, fmt.Sprintf(`regent_streams_flush_deferred_total{reason="gone",tenant=%q} 1`, f.b.Tenant))
	waitForMetric(t, f.b, fmt.Sprintf(`regent_streams_flush_deferred_total{reason="unacknowledged",tenant=%q} 1`, f.b.Tenant))
	waitForMetric(t, f.b, fmt.Sprintf(`regent_streams_cycles_total{outcome="deferred",tenant=%q} 2`, f.b.Tenant))
	if body := f.b.Scrape(t); strings.Contains(body, fmt.Sprintf(`regent_streams_cycles_total{outcome="refused",tenant=%q}`, f.b.Tenant)) {
		t.Fatalf("a deferral was counted as a refusal:\n%s", body)
	}
}

func TestCycleFoldMayDeleteARowThatIsGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, f.src, "", 0, 1)
	p := pop(t, f.b, f.src, 1, "")
	committed(t, f.b, f.body(map[string]any{"ack": ack(p.LeaseID, "completed", 1),
		"state_ops": []any{map[string]any{"type": "delete", "key": "gone"}}}))
}

// readAt returns the updated_at that state/get answers for key.
func (f fixture) readAt(t *testing.T, key string) string {
	t.Helper()
	rows := f.read(t, "", map[string]any{"keys": []string{key}})
	if len(rows) != 1 {
		t.Fatalf("state/get of %q: %v", key, rows)
	}
	return rows[0].UpdatedAt
}

// moved reads key's updated_at after a cycle rewrote it, and requires it
// to differ from before: each cycle's now() is its own, and updated_at
// has microseconds, so a round trip between the two cycles is time enough.
func (f fixture) moved(t *testing.T, key, before string) string {
	t.Helper()
	after := f.readAt(t, key)
	if after == before {
		t.Fatalf("updated_at of %q is still %s after a cycle rewrote it", key, before)
	}
	return after
}

func TestCycleStateOpIfUpdatedAtRefusesARowChangedOrDeletedSinceItWasRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	upsert := func(value any, at any) map[string]any {
		op := map[string]any{"type": "upsert", "key": "k", "value": value}
		if at != nil {
			op["if_updated_at"] = at
		}
		return f.body(map[string]any{"state_ops": []any{op}})
	}
	committed(t, f.b, upsert(1, nil))
	first := f.readAt(t, "k")
	committed(t, f.b, upsert(2, nil))
	second := f.moved(t, "k", first)

	refused(t, f.b, upsert(3, first), `stale state: key "k" changed or was deleted since it was read`)
	if got := f.state(t)["k"]; got != "2" {
		t.Fatalf("state k = %s after a refused upsert, want 2", got)
	}
	committed(t, f.b, upsert(3, second))

	third := f.readAt(t, "k")
	committed(t, f.b, f.body(map[string]any{"state_ops": []any{map[string]any{"type": "delete", "key": "k", "if_updated_at": third}}}))
	refused(t, f.b, upsert(4, third), `stale state: key "k"`)
}

func TestCycleStateOpIfUpdatedAtNullIsNoPrecondition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	committed(t, f.b, f.body(map[string]any{"state_ops": []any{
		map[string]any{"type": "upsert", "key": "k", "value": 1, "if_updated_at": nil}}}))
}

func TestCycleStateOpIfUpdatedAtMustBeAnRFC3339Time(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, at := range []any{"yesterday", 12, true, ""} {
		refused(t, f.b, f.body(map[string]any{"state_ops": []any{
			map[string]any{"type": "upsert", "key": "k", "value": 1},
			map[string]any{"type": "delete", "key": "k", "if_updated_at": at}}}),
			"state_ops[1]: if_updated_at must be the updated_at state/get returned, an RFC 3339 time")
	}
	if got := f.state(t); len(got) != 0 {
		t.Fatalf("a refused cycle wrote %v", got)
	}
}
