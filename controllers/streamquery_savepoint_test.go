package controllers_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// holdLease pushes a message to the query's source and pops it as the
// query's consumer group without acking it, as a worker in the middle of
// a fold: the group then holds a live lease.
func (h *harness) holdLease(q *v1.StreamQuery, tenant string) {
	h.t.Helper()
	tok := h.token(tenant)
	if r := h.broker.Do(h.t, "POST", "/api/v1/push", tok, map[string]any{"items": []map[string]any{
		{"queue": q.Spec.SourceQueue, "payload": map[string]any{"customer": "c", "amount": 1}}}}); r.Status != http.StatusCreated {
		h.t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	r := h.broker.Do(h.t, "GET", fmt.Sprintf("/api/v1/pop/queue/%s?batch=1&consumerGroup=%s", q.Spec.SourceQueue, v1.ConsumerGroup(q.QueryName())), tok, nil)
	if r.Status != http.StatusOK {
		h.t.Fatalf("pop: %d %s", r.Status, r.Body)
	}
}

func (h *harness) expireLeases(q *v1.StreamQuery) {
	h.t.Helper()
	if err := h.broker.DB.ExpireLeases(h.ctx, h.tenant("acme"), q.Spec.SourceQueue); err != nil {
		h.t.Fatal(err)
	}
}

func savepointNames(q *v1.StreamQuery) []string {
	var names []string
	for _, sp := range q.Status.Savepoints {
		names = append(names, sp.Name)
	}
	return names
}

func workersReason(q *v1.StreamQuery) string {
	if c := meta.FindStatusCondition(q.Status.Conditions, v1.ConditionWorkersReady); c != nil {
		return c.Reason
	}
	return ""
}

func TestAnUpgradeUnderSavepointDrainsTakesASavepointResetsThenStartsTheNewWorkers(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, revenuePipeline, func(q *v1.StreamQuery) {
		q.Spec.UpgradeMode = v1.UpgradeSavepoint
		q.Spec.Workers = &v1.Workers{Replicas: ptr.To[int32](2)}
	})
	old := q.Status.RegisteredHash
	h.writeState(q.Status.QueryID, "a", "b")
	h.holdLease(q, h.tenant("acme"))

	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Pipeline.Filter = "payload.amount > 1" })
	want := q.Spec.Pipeline.ConfigHash()
	// (a) The old workers are scaled to zero, and while one of them holds
	// a lease nothing else happens.
	q = eventually(h, q, "draining", func(q *v1.StreamQuery) bool { return workersReason(q) == v1.ReasonDraining })
	dep := &appsv1.Deployment{}
	dep.Namespace, dep.Name = q.Namespace, q.Name+"-worker"
	eventually(h, dep, "scaled to zero", func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, -1) == 0 })
	if row, _ := h.registration(h.tenant("acme"), "clicks"); row.Hash != old || len(h.stateKeys(q.Status.QueryID)) != 2 {
		t.Fatalf("while a lease is held: hash %q, state %v; want the old hash %q and the state untouched", row.Hash, h.stateKeys(q.Status.QueryID), old)
	}
	h.wantEvent(q, v1.ReasonDraining, "1 leases of consumer group streams.clicks")

	// (b), (c), (d) once the lease is gone.
	h.expireLeases(q)
	q = eventually(h, q, "upgraded", func(q *v1.StreamQuery) bool { return q.Status.RegisteredHash == want })
	sp := fmt.Sprintf("upgrade-%d", q.Generation)
	if len(q.Status.Savepoints) != 1 || q.Status.Savepoints[0].Name != sp || q.Status.Savepoints[0].ConfigHash != old || q.Status.Savepoints[0].StateRows != 2 {
		t.Fatalf("savepoints %+v, want %s of hash %q with the 2 state rows", q.Status.Savepoints, sp, old)
	}
	if row, _ := h.registration(h.tenant("acme"), "clicks"); row.Hash != want || len(h.stateKeys(q.Status.QueryID)) != 0 {
		t.Fatalf("after the upgrade: hash %q, state %v; want %q and no state", row.Hash, h.stateKeys(q.Status.QueryID), want)
	}
	eventually(h, dep, "the new workers", func(d *appsv1.Deployment) bool {
		return ptr.Deref(d.Spec.Replicas, -1) == 2 && d.Spec.Template.Annotations["streams.regent.dev/config-hash"] == want
	})
	h.wantEvent(q, v1.ReasonSavepointTaken, fmt.Sprintf("took savepoint %q", sp))
	h.wantEvent(q, "Reset", "config hash changed under upgradeMode Reset or Savepoint")
}

func TestAnUpgradeUnderResetTakesNoSavepoint(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, revenuePipeline, func(q *v1.StreamQuery) { q.Spec.UpgradeMode = v1.UpgradeReset })
	h.writeState(q.Status.QueryID, "a")
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Pipeline.Filter = "payload.amount > 1" })
	want := q.Spec.Pipeline.ConfigHash()
	q = eventually(h, q, "upgraded", func(q *v1.StreamQuery) bool { return q.Status.RegisteredHash == want })
	if len(q.Status.Savepoints) != 0 || len(h.stateKeys(q.Status.QueryID)) != 0 {
		t.Fatalf("savepoints %v and state %v after an upgrade under Reset, want none", savepointNames(q), h.stateKeys(q.Status.QueryID))
	}
}

func TestTheSavepointAnnotationTakesOneAndRestoreFromRollsBackToItsStateHashAndPipeline(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, revenuePipeline, func(q *v1.StreamQuery) { q.Spec.UpgradeMode = v1.UpgradeSavepoint })
	old, oldFilter := q.Status.RegisteredHash, q.Spec.Pipeline.Filter
	h.writeState(q.Status.QueryID, "a", "b")
	edit(h, q, func(q *v1.StreamQuery) { q.Annotations = map[string]string{v1.SavepointAnnotation: "before-v2"} })
	q = eventually(h, q, "saved", func(q *v1.StreamQuery) bool { return slices.Contains(savepointNames(q), "before-v2") })
	if sp := q.Status.Savepoints[0]; sp.StateRows != 2 || sp.ConfigHash != old || sp.Time.IsZero() {
		t.Fatalf("savepoint %+v, want 2 rows of hash %q", sp, old)
	}
	h.wantEvent(q, v1.ReasonSavepointTaken, `took savepoint "before-v2"`)

	// Upgrade, fold a little under the new pipeline, then roll back.
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Pipeline.Filter = "payload.amount > 1" })
	newHash := q.Spec.Pipeline.ConfigHash()
	q = eventually(h, q, "upgraded", func(q *v1.StreamQuery) bool { return q.Status.RegisteredHash == newHash })
	h.writeState(q.Status.QueryID, "c")
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.RestoreFrom = "before-v2" })
	q = eventually(h, q, "restored", func(q *v1.StreamQuery) bool {
		ok, _ := ready(q.Status.Conditions)
		return q.Status.LastRestore != nil && q.Status.RegisteredHash == old && ok
	})
	if keys := h.stateKeys(q.Status.QueryID); !slices.Equal(keys, []string{"a", "b"}) {
		t.Fatalf("state %v after the restore, want the savepoint's a, b", keys)
	}
	if row, _ := h.registration(h.tenant("acme"), "clicks"); row.Hash != old {
		t.Fatalf("registered hash %q after the restore, want the savepoint's %q", row.Hash, old)
	}
	if p := q.Status.LastRestore.Pipeline; p == nil || p.Filter != oldFilter {
		t.Fatalf("restored pipeline %+v, want the savepoint's (filter %q)", p, oldFilter)
	}
	dep, cm, _ := h.workers(q)
	eventually(h, dep, "running the savepoint's pipeline", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations["streams.regent.dev/config-hash"] == old
	})
	if !strings.Contains(cm.Data["pipeline.yaml"], oldFilter) {
		t.Fatalf("the ConfigMap's pipeline is not the savepoint's:\n%s", cm.Data["pipeline.yaml"])
	}
	h.wantEvent(q, v1.ReasonRestored, `restored savepoint "before-v2"`)

	// Removing restoreFrom releases the savepoint's pipeline: spec.pipeline
	// is an upgrade again. Naming the savepoint again restores it again.
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.RestoreFrom = "" })
	q = eventually(h, q, "upgraded again", func(q *v1.StreamQuery) bool {
		return q.Status.RegisteredHash == newHash && q.Status.LastRestore.Released
	})
	h.wantEvent(q, v1.ReasonRestoreReleased, `leaves savepoint "before-v2"'s pipeline`)
	h.writeState(q.Status.QueryID, "d")
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.RestoreFrom = "before-v2" })
	q = eventually(h, q, "restored again", func(q *v1.StreamQuery) bool {
		return q.Status.LastRestore.Count == 2 && !q.Status.LastRestore.Released && q.Status.RegisteredHash == old
	})
	if keys := h.stateKeys(q.Status.QueryID); !slices.Equal(keys, []string{"a", "b"}) {
		t.Fatalf("state %v after the second restore, want the savepoint's a, b", keys)
	}

	// keep bounds the list: one more savepoint under keep 1 leaves one.
	edit(h, q, func(q *v1.StreamQuery) {
		q.Spec.Savepoints = &v1.Savepoints{Keep: 1}
		q.Annotations[v1.SavepointAnnotation] = "after-rollback"
	})
	eventually(h, q, "pruned to one", func(q *v1.StreamQuery) bool {
		return slices.Equal(savepointNames(q), []string{"after-rollback"})
	})
}

func TestRestoreFromAnUnknownSavepointRestoresNothingAndSaysSo(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, revenuePipeline)
	h.writeState(q.Status.QueryID, "a")
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.RestoreFrom = "nowhere" })
	h.wantEvent(q, v1.ReasonRestoreFailed, fmt.Sprintf(`savepoint "nowhere", which query "clicks" of tenant %q does not have`, h.tenant("acme")))
	q = h.reason(q, v1.ReasonRegistered)
	if q.Status.LastRestore != nil || len(h.stateKeys(q.Status.QueryID)) != 1 {
		t.Fatalf("last restore %+v, state %v; want no restore", q.Status.LastRestore, h.stateKeys(q.Status.QueryID))
	}
}

// Workers the operator does not run are the user's: an upgrade does not
// wait for their leases (it could wait forever), it resets at once, and
// the broker refuses their cycles by their reset generation.
func TestAnUpgradeOfAQueryWhoseWorkersTheUserRunsDoesNotWaitForTheirLeases(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{noWorkerImage: true}, revenuePipeline, func(q *v1.StreamQuery) { q.Spec.UpgradeMode = v1.UpgradeReset })
	h.holdLease(q, h.tenant("acme"))
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Pipeline.Filter = "payload.amount > 1" })
	want := q.Spec.Pipeline.ConfigHash()
	q = eventually(h, q, "upgraded", func(q *v1.StreamQuery) bool { return q.Status.RegisteredHash == want })
	h.noEvent(q, v1.ReasonDraining)
}
