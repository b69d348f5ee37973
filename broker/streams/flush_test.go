package streams_test

import (
	"testing"
	"time"
)

// The rules that keep an idle flush (a cycle with "ack": null) beside folds
// exactly-once; queen_streams.cycle_v2's file says why each is needed, and
// test/flushrace runs workers that need them.

// drained pushes n messages to src, pops them all and acks them in a cycle:
// the partition is idle, with no lease held.
func (f fixture) drained(t *testing.T, n int) {
	t.Helper()
	f.b.PushN(t, "src", "", 0, n)
	p := pop(t, f.b, "src", n, "")
	committed(t, f.b, f.body(map[string]any{"ack": ack(p.LeaseID, "completed", n)}))
}

// flushBody is an idle flush that writes state key k and emits one message.
func (f fixture) flushBody(ops ...any) map[string]any {
	if ops == nil {
		ops = []any{map[string]any{"type": "upsert", "key": "k", "value": 1}}
	}
	return f.body(map[string]any{"ack": nil, "release_lease": true, "state_ops": ops,
		"push_items": []any{map[string]any{"queue": "out", "payload": 1}}})
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
	if got := f.state(t); got["k"] != "1" || sinkMessages(t, f.b, "out") != 1 {
		t.Fatalf("the flush did not apply: state %v", got)
	}
}

func TestCycleIdleFlushIsRefusedWhileAWorkerHoldsALiveLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, "src", "", 0, 5)
	pop(t, f.b, "src", 5, "")
	before := f.cursor(t, "__QUEUE_MODE__")
	refused(t, f.b, f.flushBody(), "idle flush refused: a worker holds a live lease on this partition for consumer group __QUEUE_MODE__")
	f.wantNothingWritten(t, "out", before)
}

func TestCycleIdleFlushIsRefusedWhileThePartitionHoldsUnacknowledgedMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.drained(t, 3)
	f.b.PushN(t, "src", "", 3, 1)
	before := f.cursor(t, "__QUEUE_MODE__")
	refused(t, f.b, f.flushBody(), "idle flush refused: the partition holds messages consumer group __QUEUE_MODE__ has not acknowledged")
	f.wantNothingWritten(t, "out", before)
}

func TestCycleIdleFlushOfAPartitionTheGroupNeverPoppedCommits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, "src", "", 0, 2)
	committed(t, f.b, f.body(map[string]any{"ack": nil, "consumer_group": "never-brokertest.Popped",
		"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}}}))
}

func TestCycleIdleFlushIsRefusedWhenARowItRemovesIsGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.drained(t, 1)
	before := f.cursor(t, "__QUEUE_MODE__")
	refused(t, f.b, f.flushBody(map[string]any{"type": "delete", "key": "w\u001f1"}),
		`stale state: key "w\u001f1" changed or was deleted since it was read`)
	f.wantNothingWritten(t, "out", before)

	// A row the same flush wrote first is its own to remove.
	committed(t, f.b, f.flushBody(
		map[string]any{"type": "upsert", "key": "w", "value": 1},
		map[string]any{"type": "delete", "key": "w"}))
}

func TestCycleFoldMayDeleteARowThatIsGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.b.PushN(t, "src", "", 0, 1)
	p := pop(t, f.b, "src", 1, "")
	committed(t, f.b, f.body(map[string]any{"ack": ack(p.LeaseID, "completed", 1),
		"state_ops": []any{map[string]any{"type": "delete", "key": "gone"}}}))
}

// readAt returns the updated_at that state/get answers for key.
func (f fixture) readAt(t *testing.T, key string) string {
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
		t.Fatalf("state/get of %q: %s", key, r.Body)
	}
	return out.Rows[0].UpdatedAt
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
	time.Sleep(time.Millisecond) // each cycle's now() is its own, and updated_at has microseconds
	committed(t, f.b, upsert(2, nil))
	second := f.readAt(t, "k")

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
