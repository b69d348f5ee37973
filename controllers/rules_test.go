package controllers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/controllers/registration"
)

// The reconcilers' rules against fakes (fakes_test.go); the envtest suite
// checks the same rules end to end.

// registeredWorld is a world whose query is registered, with two state
// rows written by its worker.
func registeredWorld(t *testing.T, edit ...func(*v1.StreamQuery)) *world {
	t.Helper()
	w := newWorld(t, edit...)
	w.settle(w.operator())
	w.cell.writeState(v1.DefaultTenant, "clicks", 2)
	return w
}

// resetTriggers are the two ways to ask for a reset, and how the status
// shows it done.
var resetTriggers = map[string]struct {
	ask  func(w *world)
	done func(q *v1.StreamQuery) bool
}{
	"reset-token": {
		ask: func(w *world) {
			w.edit(func(q *v1.StreamQuery) { q.Annotations = map[string]string{v1.ResetTokenAnnotation: "once"} })
		},
		done: func(q *v1.StreamQuery) bool { return q.Status.LastResetToken == "once" },
	},
	"config change": {
		ask: func(w *world) {
			w.edit(func(q *v1.StreamQuery) { q.Spec.ConfigHash, q.Spec.OnConfigChange = "h2", v1.OnConfigChangeReset })
		},
		done: func(q *v1.StreamQuery) bool { return q.Status.LastResetHash == "h2" },
	},
}

// crashDuringReset asks for a reset through ask and lets the operator die
// as it calls the broker, after the broker took the reset (commit) or
// before. It returns the intent the operator had recorded.
func (w *world) crashDuringReset(ask func(*world), commit bool) v1.PendingReset {
	w.t.Helper()
	w.cell.setIntercept(func(req registration.Request, apply func() registration.Result) registration.Result {
		if !req.Reset {
			return apply()
		}
		if commit {
			apply()
		}
		w.dead.Store(true)
		return registration.Result{Outcome: registration.Unavailable, Message: "connection reset by peer"}
	})
	ask(w)
	w.wantDeath()
	w.cell.setIntercept(nil)
	pr := w.query().Status.PendingReset
	if pr == nil {
		w.t.Fatal("no pendingReset recorded before the broker was called")
	}
	return *pr
}

// wantDeath runs a reconcile by a fresh operator that dies on the way.
func (w *world) wantDeath() {
	w.t.Helper()
	if _, err := w.reconcile(w.operator()); !errors.Is(err, errDied) {
		w.t.Fatalf("reconcile: %v, want the operator dead", err)
	}
}

// wantDone checks that the reset is recorded as done, once, and that the
// query holds wantRows state rows.
func (w *world) wantDone(done func(*v1.StreamQuery) bool, wantResets int, wantRows int64) {
	w.t.Helper()
	q := w.query()
	if !done(q) || q.Status.PendingReset != nil {
		w.t.Fatalf("status %+v: the reset is not recorded as done", q.Status)
	}
	if !meta.IsStatusConditionTrue(q.Status.Conditions, v1.ConditionReady) {
		w.t.Fatalf("conditions %+v, want Ready", q.Status.Conditions)
	}
	if _, resets := w.cell.counts(); resets != wantResets {
		w.t.Fatalf("%d resets took effect, want %d", resets, wantResets)
	}
	if rows := w.cell.query(v1.DefaultTenant, "clicks").stateRows; rows != wantRows {
		w.t.Fatalf("%d state rows, want %d", rows, wantRows)
	}
}

func TestTheIntentIsRecordedWithTheGenerationReadBeforeTheBrokerIsCalled(t *testing.T) {
	w := registeredWorld(t)
	w.cell.mu.Lock()
	w.cell.queries[v1.DefaultTenant+"/clicks"].generation = 3 // resets before this one
	w.cell.mu.Unlock()
	var recorded *v1.PendingReset
	w.cell.setIntercept(func(req registration.Request, apply func() registration.Result) registration.Result {
		if req.Reset {
			recorded = w.query().Status.PendingReset
		}
		return apply()
	})
	resetTriggers["reset-token"].ask(w)
	w.settle(w.operator())
	if recorded == nil || *recorded != (v1.PendingReset{ConfigHash: "h1", Token: "once", Generation: 3}) {
		t.Fatalf("pendingReset %+v when the broker was called, want hash h1, token once, generation 3", recorded)
	}
	w.wantDone(resetTriggers["reset-token"].done, 1, 0)
}

func TestDyingAfterRecordingTheIntentResetsOnceOnResume(t *testing.T) {
	for name, trigger := range resetTriggers {
		t.Run(name, func(t *testing.T) {
			w := registeredWorld(t)
			if pr := w.crashDuringReset(trigger.ask, false); pr.Generation != 0 {
				t.Fatalf("pendingReset %+v, want the intent recorded at generation 0", pr)
			}

			op := w.operator()
			w.settle(op)
			w.wantDone(trigger.done, 1, 0)
			w.cell.writeState(v1.DefaultTenant, "clicks", 1)
			w.settle(op)
			w.wantDone(trigger.done, 1, 1)
		})
	}
}

func TestDyingAfterTheBrokersResetCommittedDoesNotResetAgain(t *testing.T) {
	for name, trigger := range resetTriggers {
		t.Run(name, func(t *testing.T) {
			w := registeredWorld(t)
			w.crashDuringReset(trigger.ask, true)
			w.cell.writeState(v1.DefaultTenant, "clicks", 1) // the worker carries on

			op := w.operator()
			w.settle(op)
			w.wantDone(trigger.done, 1, 1)
			if sent, _ := w.cell.counts(); sent != 1 {
				t.Fatalf("%d resets sent, want 1: the restarted operator sent another", sent)
			}
			if e := w.drainEvents(); !slices.ContainsFunc(e, func(e string) bool { return strings.Contains(e, "an earlier attempt had already done it") }) {
				t.Fatalf("events %q, want the Reset event saying an earlier attempt did it", e)
			}
		})
	}
}

func TestDyingBeforeTheIntentLandsStartsOver(t *testing.T) {
	for name, trigger := range resetTriggers {
		t.Run(name, func(t *testing.T) {
			w := registeredWorld(t)
			w.dieOnIntent.Store(true)
			trigger.ask(w)
			w.wantDeath()
			if sent, _ := w.cell.counts(); sent != 0 || w.query().Status.PendingReset != nil {
				t.Fatalf("%d resets sent, pendingReset %+v: want nothing done", sent, w.query().Status.PendingReset)
			}

			w.dieOnIntent.Store(false)
			w.settle(w.operator())
			w.wantDone(trigger.done, 1, 0)
		})
	}
}

func TestAStaleCachedCopyNeverStartsAReset(t *testing.T) {
	w := registeredWorld(t)
	resetTriggers["reset-token"].ask(w)
	asked := w.query() // what the cache may still serve once the reset is done
	op := w.operator()
	w.settle(op)
	w.cell.writeState(v1.DefaultTenant, "clicks", 1)

	w.serveStale(asked)
	if res, err := w.reconcile(op); err != nil || res != retrySoon {
		t.Fatalf("reconcile of a stale copy = %v, %v; want a prompt retry", res, err)
	}
	w.wantDone(resetTriggers["reset-token"].done, 1, 1)
}

func TestAStaleCachedCopyNeverResumesAReset(t *testing.T) {
	w := registeredWorld(t)
	var pending *v1.StreamQuery
	w.cell.setIntercept(func(req registration.Request, apply func() registration.Result) registration.Result {
		if req.Reset {
			pending = w.query()
		}
		return apply()
	})
	resetTriggers["reset-token"].ask(w)
	op := w.operator()
	w.settle(op)
	w.drainEvents()

	w.serveStale(pending)
	if res, err := w.reconcile(op); err != nil || res != retrySoon {
		t.Fatalf("reconcile of a stale copy = %v, %v; want a prompt retry", res, err)
	}
	if e := w.drainEvents(); len(e) != 0 {
		t.Fatalf("events %q from a stale copy", e)
	}
	w.wantDone(resetTriggers["reset-token"].done, 1, 0)
}

func TestAPendingResetOfAQueryThatIsGoneIsDoneWithoutSendingIt(t *testing.T) {
	w := registeredWorld(t)
	w.crashDuringReset(resetTriggers["reset-token"].ask, false)
	old := w.cell.query(v1.DefaultTenant, "clicks").id
	if _, err := w.cell.DeleteQuery(context.Background(), v1.DefaultTenant, "clicks"); err != nil {
		t.Fatal(err)
	}

	w.settle(w.operator())
	w.wantDone(resetTriggers["reset-token"].done, 0, 0)
	if sent, _ := w.cell.counts(); sent != 1 {
		t.Fatalf("%d resets sent, want only the one lost with the first operator", sent)
	}
	if q := w.query(); q.Status.QueryID == old {
		t.Fatalf("query id %s, want the new registration's", q.Status.QueryID)
	}
}

func TestEachBrokerAnswerSetsItsReadyCondition(t *testing.T) {
	for name, tc := range map[string]struct {
		answer  registration.Result
		ready   metav1.ConditionStatus
		reason  string
		message string
		backoff bool // the reconcile fails, for the work queue to retry
	}{
		"200 registered": {registration.Result{Outcome: registration.Registered, QueryID: "query-7"}, metav1.ConditionTrue, v1.ReasonRegistered, `config hash "h1"`, false},
		"409 conflict":   {registration.Result{Outcome: registration.Conflict, Message: "registered with a different config_hash"}, metav1.ConditionFalse, v1.ReasonConfigConflict, "different config_hash (upgradeMode is Block", false},
		"403 denied":     {registration.Result{Outcome: registration.Denied, Message: "tenant has no quota grant"}, metav1.ConditionFalse, v1.ReasonQuotaDenied, "no quota grant", false},
		"anything else":  {registration.Result{Outcome: registration.Unavailable, Message: "HTTP 500: Internal server error"}, metav1.ConditionFalse, v1.ReasonBrokerUnavailable, "HTTP 500", true},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			w.cell.setIntercept(func(registration.Request, func() registration.Result) registration.Result { return tc.answer })
			_, err := w.reconcile(w.operator())
			if (err != nil) != tc.backoff {
				t.Fatalf("reconcile error %v, want one: %v", err, tc.backoff)
			}
			q := w.query()
			c := meta.FindStatusCondition(q.Status.Conditions, v1.ConditionReady)
			if c == nil || c.Status != tc.ready || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) {
				t.Fatalf("Ready %+v, want %s, %s, a message containing %q", c, tc.ready, tc.reason, tc.message)
			}
			if tc.ready == metav1.ConditionTrue && q.Status.QueryID != tc.answer.QueryID {
				t.Fatalf("query id %q, want %q", q.Status.QueryID, tc.answer.QueryID)
			}
			if e := w.drainEvents(); !slices.ContainsFunc(e, func(e string) bool { return strings.Contains(e, " "+tc.reason+" ") }) {
				t.Fatalf("events %q, want one with reason %s", e, tc.reason)
			}
		})
	}
}

func TestADatabaseErrorMakesTheTenantQuotaNotReady(t *testing.T) {
	w := newWorld(t)
	tq := &v1.TenantQuota{ObjectMeta: metav1.ObjectMeta{Name: "acme", Generation: 1}, Spec: v1.TenantQuotaSpec{Tenant: "acme"}}
	if err := w.api.Create(context.Background(), tq); err != nil {
		t.Fatal(err)
	}
	w.cell.dbErr = errors.New("connection refused")
	r := &TenantQuotaReconciler{Client: w.api, Recorder: w.events, Config: Config{Broker: w.cell, DB: w.cell}}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tq)}); !errors.Is(err, w.cell.dbErr) {
		t.Fatalf("reconcile: %v, want the database error for the work queue to retry", err)
	}
	if err := w.api.Get(context.Background(), client.ObjectKeyFromObject(tq), tq); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(tq.Status.Conditions, v1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1.ReasonDatabaseUnavailable || !strings.Contains(c.Message, "connection refused") {
		t.Fatalf("Ready %+v, want False, DatabaseUnavailable, with the error", c)
	}
}
