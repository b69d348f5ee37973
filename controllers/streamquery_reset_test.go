package controllers_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// settled waits until the operator has read the query's progress after the
// worker's last write, which takes a full reconcile (registration
// included), so that any reset it was going to repeat would have happened.
func settled(h *harness, q *v1.StreamQuery, stateRows int64) *v1.StreamQuery {
	h.t.Helper()
	return eventually(h, q, "settled", func(q *v1.StreamQuery) bool {
		return q.Status.StateRows != nil && *q.Status.StateRows == stateRows && q.Status.PendingReset == nil
	})
}

func annotate(h *harness, q *v1.StreamQuery, token string) {
	edit(h, q, func(q *v1.StreamQuery) {
		if q.Annotations == nil {
			q.Annotations = map[string]string{}
		}
		q.Annotations[v1.ResetTokenAnnotation] = token
	})
}

func TestConfigConflictThenResetResetsTheStateExactlyOnce(t *testing.T) {
	h, p, _, q := registered(t, operatorOpts{resync: 300 * time.Millisecond})
	id := q.Status.QueryID
	h.writeState(id, "a", "b")

	edit(h, q, func(q *v1.StreamQuery) { q.Spec.ConfigHash = "h2" })
	h.reason(q, v1.ReasonConfigConflict)
	if keys := h.stateKeys(id); len(keys) != 2 {
		t.Fatalf("state %q changed under Block", keys)
	}

	edit(h, q, func(q *v1.StreamQuery) { q.Spec.OnConfigChange = v1.OnConfigChangeReset })
	q = eventually(h, q, "reset to h2", func(q *v1.StreamQuery) bool {
		ok, _ := ready(q.Status.Conditions)
		return ok && q.Status.RegisteredHash == "h2" && q.Status.LastResetHash == "h2"
	})
	if keys := h.stateKeys(id); len(keys) != 0 {
		t.Fatalf("state %q survived the reset", keys)
	}
	if row, _ := h.registration(h.tenant("acme"), "clicks"); row.Hash != "h2" || row.ID != id {
		t.Fatalf("registration %+v, want hash h2 under the same id %s", row, id)
	}
	h.wantEvent(q, "Reset", "config hash changed under upgradeMode Reset or Savepoint")

	// The worker folds under the new hash; resyncs must leave that alone.
	h.writeState(id, "c")
	settled(h, q, 1)
	if keys := h.stateKeys(id); !slices.Equal(keys, []string{"c"}) {
		t.Fatalf("state %q, want [c]: the query was reset again", keys)
	}
	if n := p.resets.Load(); n != 1 {
		t.Fatalf("%d resets sent, want exactly 1", n)
	}
}

func TestResetTokenResetsOncePerNewValue(t *testing.T) {
	h, p, _, q := registered(t, operatorOpts{resync: 300 * time.Millisecond})
	id := q.Status.QueryID

	for i, token := range []string{"first", "second"} {
		h.writeState(id, "before-"+token)
		annotate(h, q, token)
		q = eventually(h, q, "reset for "+token, func(q *v1.StreamQuery) bool { return q.Status.LastResetToken == token })
		if keys := h.stateKeys(id); len(keys) != 0 {
			t.Fatalf("state %q survived reset %q", keys, token)
		}
		h.wantEvent(q, "Reset", `annotation set to "`+token+`"`)

		h.writeState(id, "after-"+token)
		settled(h, q, 1)
		if keys := h.stateKeys(id); !slices.Equal(keys, []string{"after-" + token}) {
			t.Fatalf("state %q: token %q reset more than once", keys, token)
		}
		if n := p.resets.Load(); n != int32(i+1) {
			t.Fatalf("%d resets after token %q, want %d", n, token, i+1)
		}
	}
}

func TestResetTokenOnANewQueryHasNothingToReset(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	p := h.proxy()
	h.startOperator(operatorOpts{brokerURL: p.URL})
	q := h.query(h.namespace(h.tenant("acme")), "clicks", func(q *v1.StreamQuery) {
		q.Annotations = map[string]string{v1.ResetTokenAnnotation: "from-the-start"}
	})
	q = h.reason(q, v1.ReasonRegistered)
	if q.Status.LastResetToken != "from-the-start" {
		t.Fatalf("lastResetToken %q, want the token marked as honoured", q.Status.LastResetToken)
	}
	if n := p.resets.Load(); n != 0 {
		t.Fatalf("%d resets sent for a query that had no state", n)
	}
}

func TestAConflictOverAHashAlreadyResetForIsReportedNotResetAgain(t *testing.T) {
	h, p, _, q := registered(t, operatorOpts{}, func(q *v1.StreamQuery) { q.Spec.OnConfigChange = v1.OnConfigChangeReset })
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.ConfigHash = "h2" })
	eventually(h, q, "reset to h2", func(q *v1.StreamQuery) bool { return q.Status.LastResetHash == "h2" })

	// An old worker puts its own hash back, resetting on its own.
	r := h.broker.Do(t, "POST", "/streams/v1/queries", h.token(h.tenant("acme")),
		map[string]any{"name": "clicks", "source_queue": "orders", "config_hash": "h1", "reset": true})
	if r.Status != http.StatusOK {
		t.Fatalf("worker registration: %d %s", r.Status, r.Body)
	}
	annotate(h, q, "") // any edit makes the operator look again
	edit(h, q, func(q *v1.StreamQuery) { q.Annotations["nudge"] = "1" })
	q = h.reason(q, v1.ReasonConfigConflict)
	if m := message(q.Status.Conditions); !strings.Contains(m, "does not reset twice for one hash") {
		t.Fatalf("message %q should explain why there is no second reset", m)
	}
	if row, _ := h.registration(h.tenant("acme"), "clicks"); row.Hash != "h1" {
		t.Fatalf("registered hash %q, want the worker's h1 left alone", row.Hash)
	}
	if n := p.resets.Load(); n != 1 {
		t.Fatalf("%d resets sent, want 1", n)
	}
}

// triggers are the two ways to ask for a reset.
var triggers = map[string]func(h *harness, q *v1.StreamQuery) (done func(*v1.StreamQuery) bool){
	"reset-token": func(h *harness, q *v1.StreamQuery) func(*v1.StreamQuery) bool {
		annotate(h, q, "once")
		return func(q *v1.StreamQuery) bool { return q.Status.LastResetToken == "once" }
	},
	"config change": func(h *harness, q *v1.StreamQuery) func(*v1.StreamQuery) bool {
		edit(h, q, func(q *v1.StreamQuery) { q.Spec.ConfigHash, q.Spec.OnConfigChange = "h2", v1.OnConfigChangeReset })
		return func(q *v1.StreamQuery) bool { return q.Status.LastResetHash == "h2" }
	},
}

// The operator dies after the broker has reset the query but before it
// could record that: its successor must not reset again, and the state the
// worker wrote since survives.
func TestOperatorRestartAfterTheBrokerResetDoesNotResetAgain(t *testing.T) {
	t.Parallel() // its subtests are, and it would hold the sequential tests back until they end
	for name, trigger := range triggers {
		t.Run(name, func(t *testing.T) {
			h, p, first, q := registered(t, operatorOpts{})
			id := q.Status.QueryID
			h.writeState(id, "old")

			p.setOnReset(func(w http.ResponseWriter, r *http.Request, body []byte) {
				rec := httptest.NewRecorder()
				p.forward(rec, r.Clone(r.Context()), body)
				if rec.Code == http.StatusOK {
					p.resets.Add(1)
				}
				first.stop() // dies before it reads the answer
			})
			done := trigger(h, q)
			q = eventually(h, q, "mid-reset", func(q *v1.StreamQuery) bool { return p.resets.Load() == 1 })
			first.stop()
			if q.Status.PendingReset == nil {
				t.Fatal("no pendingReset recorded before the broker was called")
			}
			if keys := h.stateKeys(id); len(keys) != 0 {
				t.Fatalf("state %q: the broker's reset did not happen", keys)
			}

			h.writeState(id, "new") // the worker carries on
			p.setOnReset(nil)
			h.startOperator(operatorOpts{brokerURL: p.URL, resync: 300 * time.Millisecond})
			q = eventually(h, q, "finished", func(q *v1.StreamQuery) bool {
				ok, _ := ready(q.Status.Conditions)
				return ok && done(q) && q.Status.PendingReset == nil
			})
			settled(h, q, 1)
			if keys := h.stateKeys(id); !slices.Equal(keys, []string{"new"}) {
				t.Fatalf("state %q, want [new]: the restarted operator reset again", keys)
			}
			if n := p.resets.Load(); n != 1 {
				t.Fatalf("%d resets, want 1", n)
			}
			h.wantEvent(q, "Reset", "an earlier attempt had already done it")
		})
	}
}

// The operator dies after recording the reset but before the broker got it:
// its successor carries it out, once.
func TestOperatorRestartBeforeTheBrokerResetResetsOnce(t *testing.T) {
	t.Parallel() // its subtests are, and it would hold the sequential tests back until they end
	for name, trigger := range triggers {
		t.Run(name, func(t *testing.T) {
			h, p, first, q := registered(t, operatorOpts{})
			id := q.Status.QueryID
			h.writeState(id, "old")

			died := make(chan struct{})
			p.setOnReset(func(w http.ResponseWriter, r *http.Request, body []byte) {
				first.stop()
				close(died)
				http.Error(w, "operator died first", http.StatusBadGateway)
			})
			done := trigger(h, q)
			<-died
			q = eventually(h, q, "pending", func(q *v1.StreamQuery) bool { return q.Status.PendingReset != nil })
			if keys := h.stateKeys(id); !slices.Equal(keys, []string{"old"}) {
				t.Fatalf("state %q changed before the broker was asked", keys)
			}

			p.setOnReset(nil)
			h.startOperator(operatorOpts{brokerURL: p.URL, resync: 300 * time.Millisecond})
			q = eventually(h, q, "reset", func(q *v1.StreamQuery) bool { return done(q) && q.Status.PendingReset == nil })
			if keys := h.stateKeys(id); len(keys) != 0 {
				t.Fatalf("state %q survived the reset", keys)
			}
			h.writeState(id, "new")
			settled(h, q, 1)
			if n := p.resets.Load(); n != 1 {
				t.Fatalf("%d resets, want 1", n)
			}
		})
	}
}
