package controllers_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/controllers"
)

// pushOrders pushes n messages to acme's queue orders, the source of the
// harness's queries, in one request.
func (h *harness) pushOrders(n int) {
	h.t.Helper()
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"queue": "orders", "payload": map[string]any{"n": i}}
	}
	if r := h.broker.Do(h.t, "POST", "/api/v1/push", h.token(h.tenant("acme")), map[string]any{"items": items}); r.Status != http.StatusCreated {
		h.t.Fatalf("push: %d %s", r.Status, r.Body)
	}
}

// consumeOrders pops up to n messages of orders as query clicks's group,
// acknowledged at once, and returns how many it got.
func (h *harness) consumeOrders(n int) int {
	h.t.Helper()
	r := h.broker.Do(h.t, "GET", "/api/v1/pop/queue/orders/partition/Default?autoAck=true&consumerGroup=streams.clicks&batch="+
		strconv.Itoa(n), h.token(h.tenant("acme")), nil)
	switch r.Status {
	case http.StatusNoContent:
		return 0
	case http.StatusOK:
		return len(r.Map(h.t)["messages"].([]any))
	}
	h.t.Fatalf("pop: %d %s", r.Status, r.Body)
	return 0
}

func (h *harness) committed() int64 {
	h.t.Helper()
	return h.cursor("streams.clicks").Committed
}

func (h *harness) dbNow() time.Time {
	h.t.Helper()
	now, err := h.broker.DB.Now(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return now
}

func condition(q *v1.StreamQuery, typ string) (status, reason string) {
	c := meta.FindStatusCondition(q.Status.Conditions, typ)
	if c == nil {
		return "", ""
	}
	return string(c.Status), c.Reason
}

func rewindTo(h *harness, q *v1.StreamQuery, value string) {
	edit(h, q, func(q *v1.StreamQuery) {
		if q.Annotations == nil {
			q.Annotations = map[string]string{}
		}
		q.Annotations[v1.RewindToAnnotation] = value
	})
}

func TestSuspendSetsTheSuspendedConditionAndTheQuerysFlagUntilItIsOff(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{resync: 300 * time.Millisecond})
	if s, r := condition(q, v1.ConditionSuspended); s != "False" || r != v1.ReasonRunning {
		t.Fatalf("a running query's Suspended condition is %s/%s, want False/Running", s, r)
	}
	suspended := func() bool {
		_, q, err := h.broker.DB.StreamQueryNamed(h.ctx, h.tenant("acme"), "clicks")
		if err != nil {
			t.Fatal(err)
		}
		return q.Suspended
	}

	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Suspend = true })
	q = eventually(h, q, "Suspended", func(q *v1.StreamQuery) bool {
		s, r := condition(q, v1.ConditionSuspended)
		return s == "True" && r == v1.ReasonSuspended
	})
	if !suspended() {
		t.Fatal("the condition says Suspended and the query row does not")
	}
	if ok, _ := ready(q.Status.Conditions); !ok {
		t.Fatal("a suspended query is not Ready: it is still registered")
	}
	h.wantEvent(q, "Suspended", "streams.clicks")

	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Suspend = false })
	q = eventually(h, q, "resumed", func(q *v1.StreamQuery) bool { s, _ := condition(q, v1.ConditionSuspended); return s == "False" })
	if suspended() {
		t.Fatal("the query row is still suspended after spec.suspend went off")
	}
	h.wantEvent(q, "Resumed", "where the cursors stand")
}

func TestRewindToDeletesTheStateAndMovesTheGroupBackOncePerValue(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{resync: 300 * time.Millisecond})
	id := q.Status.QueryID
	before := h.dbNow()
	h.pushOrders(10)
	if n := h.consumeOrders(100); n != 10 {
		t.Fatalf("consumed %d, want 10", n)
	}
	h.writeState(id, "folded")

	value := before.UTC().Format(time.RFC3339Nano)
	rewindTo(h, q, value)
	q = eventually(h, q, "rewound", func(q *v1.StreamQuery) bool { return q.Status.LastRewind != nil && q.Status.LastRewind.To == value })
	if rw := q.Status.LastRewind; rw.Partitions != 1 || rw.Time.IsZero() {
		t.Fatalf("lastRewind %+v, want one partition moved and its time", rw)
	}
	if keys := h.stateKeys(id); len(keys) != 0 {
		t.Fatalf("state %q survived the rewind", keys)
	}
	if c := h.committed(); c != 0 {
		t.Fatalf("the group's cursor is at %d after a rewind to before every message, want 0", c)
	}
	h.wantEvent(q, "Rewound", "on 1 source partitions")

	// The worker folds again; resyncs with the same annotation leave that alone.
	if n := h.consumeOrders(100); n != 10 {
		t.Fatalf("redelivered %d, want the 10 again", n)
	}
	h.writeState(id, "refolded")
	settled(h, q, 1)
	if keys, c := h.stateKeys(id), h.committed(); !slices.Equal(keys, []string{"refolded"}) || c != 10 {
		t.Fatalf("state %q and cursor %d after resyncs, want [refolded] and 10: the query was rewound again", keys, c)
	}
}

// rewindThenDie commits each rewind and then fails the call, as an operator
// does that dies between the rewind's commit and its status write; after
// the commit it lets the worker fold again (refold).
type rewindThenDie struct {
	controllers.CellDB
	refold func()
	calls  atomic.Int32
	done   atomic.Int32 // rewinds that did something
}

func (d *rewindThenDie) Rewind(ctx context.Context, tenant, name, group, token string, to time.Time) (celldb.Rewound, error) {
	rw, err := d.CellDB.Rewind(ctx, tenant, name, group, token, to)
	if err == nil && !rw.Already {
		d.done.Add(1)
	}
	if d.calls.Add(1) > 1 {
		return rw, err
	}
	d.refold()
	return celldb.Rewound{}, errors.New("the operator died before it wrote the status")
}

func TestARewindThatCommittedBeforeItsStatusWasWrittenIsNotRepeated(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	var id string
	db := &rewindThenDie{refold: func() {
		h.consumeOrders(100)
		h.writeState(id, "refolded")
	}}
	h.startOperator(operatorOpts{resync: 300 * time.Millisecond, db: func(real controllers.CellDB) controllers.CellDB {
		db.CellDB = real
		return db
	}})
	q := h.reason(h.query(h.namespace(h.tenant("acme")), "clicks"), v1.ReasonRegistered)
	id = q.Status.QueryID
	before := h.dbNow()
	h.pushOrders(10)
	h.consumeOrders(100)
	h.writeState(id, "folded")

	value := before.UTC().Format(time.RFC3339Nano)
	rewindTo(h, q, value)
	q = eventually(h, q, "rewound", func(q *v1.StreamQuery) bool { return q.Status.LastRewind != nil && q.Status.LastRewind.To == value })
	settled(h, q, 1)
	if n := db.calls.Load(); n < 2 {
		t.Fatalf("%d rewind calls, want the failed one and the one that recorded it", n)
	}
	if n := db.done.Load(); n != 1 {
		t.Fatalf("%d rewinds took effect, want exactly 1", n)
	}
	if keys, c := h.stateKeys(id), h.committed(); !slices.Equal(keys, []string{"refolded"}) || c != 10 {
		t.Fatalf("state %q and cursor %d, want [refolded] and 10: the re-run rewound again", keys, c)
	}
	h.wantEvent(q, "Rewound", "an earlier attempt had already done it")
}

func TestAnInvalidRewindTimeIsReportedAndChangesNothing(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{resync: 300 * time.Millisecond})
	id := q.Status.QueryID
	h.pushOrders(3)
	h.consumeOrders(100)
	h.writeState(id, "folded")

	rewindTo(h, q, "yesterday at noon")
	h.wantEvent(q, "InvalidRewind", `"yesterday at noon" is not an RFC 3339 time`)
	q = settled(h, q, 1)
	if q.Status.LastRewind != nil {
		t.Fatalf("lastRewind %+v recorded for an invalid time", q.Status.LastRewind)
	}
	if keys, c := h.stateKeys(id), h.committed(); !slices.Equal(keys, []string{"folded"}) || c != 3 {
		t.Fatalf("state %q and cursor %d, want them untouched ([folded], 3)", keys, c)
	}
}

func TestFreshIsFalseWhileALagBoundIsExceededWithEventsAndAMetric(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{resync: 300 * time.Millisecond}, func(q *v1.StreamQuery) {
		q.Spec.Freshness = &v1.Freshness{MaxLag: ptr.To[int64](3)}
	})
	q = eventually(h, q, "Fresh", func(q *v1.StreamQuery) bool { s, _ := condition(q, v1.ConditionFresh); return s == "True" })
	waitSeries(t, "regent_streamquery_fresh", q.Namespace, q.Name, only(h.tenant("acme"), 1))

	h.pushOrders(5)
	q = eventually(h, q, "stale", func(q *v1.StreamQuery) bool {
		s, r := condition(q, v1.ConditionFresh)
		return s == "False" && r == v1.ReasonLagExceeded
	})
	h.wantEvent(q, v1.ReasonLagExceeded, "lag 5 messages exceeds maxLag 3")
	waitSeries(t, "regent_streamquery_fresh", q.Namespace, q.Name, only(h.tenant("acme"), 0))

	h.consumeOrders(3)
	q = eventually(h, q, "fresh again", func(q *v1.StreamQuery) bool { s, _ := condition(q, v1.ConditionFresh); return s == "True" })
	h.wantEvent(q, v1.ReasonWithinObjective, "lag 2 messages")

	// The age bound: the two messages left are aged by two seconds, past
	// maxLagSeconds 1, as two seconds passing would.
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Freshness = &v1.Freshness{MaxLagSeconds: ptr.To[int64](1)} })
	if err := h.broker.DB.Age(h.ctx, h.tenant("acme"), "orders", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	q = eventually(h, q, "stale by age", func(q *v1.StreamQuery) bool { s, _ := condition(q, v1.ConditionFresh); return s == "False" })
	if q.Status.LagSeconds == nil || *q.Status.LagSeconds < 2 {
		t.Fatalf("lagSeconds %v, want beyond maxLagSeconds 1", q.Status.LagSeconds)
	}
	h.wantEvent(q, v1.ReasonLagExceeded, "beyond maxLagSeconds 1")
	waitSeries(t, "regent_streamquery_lag_seconds", q.Namespace, q.Name, func(s map[string]float64) bool { return s[h.tenant("acme")] >= 2 })

	// Without an objective there is no condition and no series.
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Freshness = nil })
	eventually(h, q, "without Fresh", func(q *v1.StreamQuery) bool { s, _ := condition(q, v1.ConditionFresh); return s == "" })
	waitSeries(t, "regent_streamquery_fresh", q.Namespace, q.Name, none)
}
