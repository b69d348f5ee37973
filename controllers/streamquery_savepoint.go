package controllers

// Savepoints, restores and the drain that both restores and upgrades begin
// with.
//
// A savepoint (queen_streams.savepoint_take) and a restore
// (queen_streams.savepoint_restore) each commit in one transaction that no
// cycle falls inside, and each is fenced in the database rather than in
// the status: a savepoint name is taken once, and a restore token (below)
// restores once. An operator
// that dies after the commit and before its status write finds the work
// done at its next reconcile and only records it.
//
// A restore first drains: the workers are scaled to zero and the operator
// waits until the query's consumer group holds no live lease, so that no
// worker of the pipeline being replaced folds into the restored state.
// While spec.restoreFrom names the restored savepoint, the query runs the
// savepoint's pipeline and hash (status.lastRestore), whatever
// spec.pipeline says; removing restoreFrom releases it (lastRestore.released)
// and makes spec.pipeline the query's again, which is an upgrade under
// upgradeMode. The restore's fence is the StreamQuery's UID, the
// savepoint's name and the count of its restores, so that naming the same
// savepoint again after a release restores it again.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
)

// drainPoll is how often a drain looks again for the old workers' leases,
// unless Config.DrainPoll says otherwise.
const drainPoll = 2 * time.Second

func (r *StreamQueryReconciler) drainEvery() time.Duration {
	if r.DrainPoll > 0 {
		return r.DrainPoll
	}
	return drainPoll
}

// pipelineAnnotation on a worker Deployment holds, as JSON, the pipeline
// its pods run: the pipeline an upgrade's savepoint records, since by
// then spec.pipeline is already the new one.
const pipelineAnnotation = "streams.regent.dev/pipeline"

var savepointName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)

// restored is the restore whose savepoint the query runs, or nil.
func restored(q *v1.StreamQuery) *v1.RestoreStatus {
	if lr := q.Status.LastRestore; lr != nil && !lr.Released && lr.Savepoint == q.Spec.RestoreFrom {
		return lr
	}
	return nil
}

// runPipeline is the pipeline the query's workers run: the restored
// savepoint's, or the spec's.
func runPipeline(q *v1.StreamQuery) *v1.Pipeline {
	if lr := restored(q); lr != nil && lr.Pipeline != nil {
		return lr.Pipeline
	}
	return specPipeline(q)
}

func pipelineJSON(p *v1.Pipeline) (*string, error) {
	if p == nil {
		return nil, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode pipeline: %w", err)
	}
	s := string(b)
	return &s, nil
}

// runsWorkers says whether the operator runs the query's workers, which a
// restore or an upgrade then drains first. Workers the user runs (no
// pipeline, or no worker image) are not drained: their cycles are refused
// for their lease or their reset generation instead.
func (r *StreamQueryReconciler) runsWorkers(q *v1.StreamQuery) bool {
	return wantsWorkers(q) && r.workerImage(q) != ""
}

// drain scales the query's workers to zero and reports whether they are
// gone: no pod of the Deployment and no live lease of the query's group.
// why says what waits for it, for the condition and the event.
func (r *StreamQueryReconciler) drain(ctx context.Context, s *step, why string) (bool, error) {
	q := s.q
	var dep appsv1.Deployment
	err := r.Get(ctx, client.ObjectKey{Namespace: q.Namespace, Name: workersName(q)}, &dep)
	pods := int32(0)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, fmt.Errorf("read Deployment %s/%s: %w", q.Namespace, workersName(q), err)
	default:
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 0 {
			patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`))
			if err := r.Patch(ctx, &dep, patch, client.FieldOwner(fieldOwner)); err != nil {
				return false, fmt.Errorf("scale Deployment %s/%s to zero: %w", q.Namespace, workersName(q), err)
			}
		}
		pods = dep.Status.Replicas
	}
	// The workers that start after the drain begin as a resumed query's
	// do (the autoscaler's minReplicas): no decision about the old ones
	// carries over.
	if w := q.Status.Workers; w != nil {
		w.Desired, w.Autoscaler = 0, nil
	}
	leases, err := r.DB.Leases(ctx, s.tenant, q.QueryName(), consumerGroup(q))
	if err != nil {
		return false, err
	}
	if pods == 0 && leases == 0 {
		return true, nil
	}
	msg := fmt.Sprintf("draining for %s: Deployment %s is scaled to zero; waiting for %d pods to stop and %d leases of consumer group %s to be released or expire",
		why, workersName(q), pods, leases, consumerGroup(q))
	if setCondition(&q.Status.Conditions, v1.ConditionWorkersReady, q.Generation, false, v1.ReasonDraining, msg) {
		r.event(q, corev1.EventTypeNormal, v1.ReasonDraining, "Drain", msg)
	}
	return false, r.writeStatus(ctx, s)
}

// restore carries out spec.restoreFrom when it names a savepoint not yet
// restored. done says the reconcile ends here, with res and err.
func (r *StreamQueryReconciler) restore(ctx context.Context, s *step) (res ctrl.Result, done bool, err error) {
	q, st := s.q, &s.q.Status
	name, last := q.Spec.RestoreFrom, st.LastRestore
	switch {
	case name == "" && last != nil && !last.Released:
		last.Released, last.Pipeline = true, nil
		r.event(q, corev1.EventTypeNormal, v1.ReasonRestoreReleased, "Restore", fmt.Sprintf(
			"spec.restoreFrom is gone: the query leaves savepoint %q's pipeline and runs spec.pipeline, under upgradeMode %s", last.Savepoint, q.Spec.Upgrade()))
		return res, false, nil
	case name == "" || restored(q) != nil:
		return res, false, nil
	}
	count := int64(1)
	if last != nil {
		count = last.Count + 1
	}
	if !hasSavepoint(st.Savepoints, name) {
		// The list in the status may be stale: read it again first.
		if err := r.listSavepoints(ctx, s); err != nil && !errors.Is(err, celldb.ErrNoQuery) {
			return res, true, err
		}
		if !hasSavepoint(st.Savepoints, name) {
			r.event(q, corev1.EventTypeWarning, v1.ReasonRestoreFailed, "Restore", fmt.Sprintf(
				"spec.restoreFrom names savepoint %q, which query %q of tenant %q does not have: nothing was restored", name, q.QueryName(), s.tenant))
			return res, false, nil
		}
	}
	if r.runsWorkers(q) {
		drained, err := r.drain(ctx, s, fmt.Sprintf("the restore of savepoint %q", name))
		if err != nil || !drained {
			return ctrl.Result{RequeueAfter: r.drainEvery()}, true, err
		}
	}
	rs, err := r.DB.RestoreSavepoint(ctx, s.tenant, q.QueryName(), consumerGroup(q), name, fmt.Sprintf("%s/%s/%d", q.UID, name, count))
	switch {
	case errors.Is(err, celldb.ErrNoQuery), errors.Is(err, celldb.ErrNoSavepoint):
		r.event(q, corev1.EventTypeWarning, v1.ReasonRestoreFailed, "Restore", err.Error())
		return res, false, nil
	case err != nil:
		return res, true, err
	}
	lr := &v1.RestoreStatus{Savepoint: name, Time: metav1.NewTime(rs.At.Truncate(time.Second)), ConfigHash: rs.ConfigHash, Count: count}
	if rs.Pipeline != nil {
		lr.Pipeline = &v1.Pipeline{}
		if err := json.Unmarshal([]byte(*rs.Pipeline), lr.Pipeline); err != nil {
			return res, true, fmt.Errorf("decode the pipeline of savepoint %q: %w", name, err)
		}
	}
	st.LastRestore = lr
	// The restore registered the savepoint's hash, as a reset would have:
	// an upgrade to the hash the restore left is then not a second reset
	// for one hash.
	st.LastResetHash = rs.ConfigHash
	msg := fmt.Sprintf("restored savepoint %q of query %q of tenant %q: %d state rows, the positions of consumer group %s on %d partitions and config hash %q; its leases released; the workers restart with the savepoint's pipeline",
		name, q.QueryName(), s.tenant, rs.StateRows, consumerGroup(q), rs.Cursors, rs.ConfigHash)
	if rs.Already {
		msg += "; an earlier attempt had already done it"
	}
	r.event(q, corev1.EventTypeNormal, v1.ReasonRestored, "Restore", msg)
	return res, false, nil
}

func hasSavepoint(list []v1.SavepointStatus, name string) bool {
	for _, sp := range list {
		if sp.Name == name {
			return true
		}
	}
	return false
}

// takeSavepoint takes the savepoint name of the registered query with
// pipeline p, keeps spec.savepoints.keep of them, and lists them in the
// status.
func (r *StreamQueryReconciler) takeSavepoint(ctx context.Context, s *step, name string, p *v1.Pipeline, why string) error {
	q := s.q
	body, err := pipelineJSON(p)
	if err != nil {
		return err
	}
	sp, existed, err := r.DB.TakeSavepoint(ctx, s.tenant, q.QueryName(), consumerGroup(q), name, body)
	if err != nil {
		return err
	}
	if _, err := r.DB.PruneSavepoints(ctx, s.tenant, q.QueryName(), q.Spec.Keep()); err != nil {
		return err
	}
	msg := fmt.Sprintf("took savepoint %q of query %q of tenant %q (%s): %d state rows and the positions of consumer group %s on %d partitions, config hash %q",
		name, q.QueryName(), s.tenant, why, sp.StateRows, consumerGroup(q), sp.Cursors, sp.ConfigHash)
	if existed {
		msg += "; an earlier attempt had already taken it"
	}
	r.event(q, corev1.EventTypeNormal, v1.ReasonSavepointTaken, "Savepoint", msg)
	return r.listSavepoints(ctx, s)
}

// savepoints honours the savepoint annotation and lists the query's
// savepoints in the status.
func (r *StreamQueryReconciler) savepoints(ctx context.Context, s *step) error {
	q, st := s.q, &s.q.Status
	req := q.Annotations[v1.SavepointAnnotation]
	switch {
	case req == "" || req == st.LastSavepointRequest:
	case !savepointName.MatchString(req):
		st.LastSavepointRequest = req
		r.event(q, corev1.EventTypeWarning, v1.ReasonSavepointInvalid, "Savepoint", fmt.Sprintf(
			"%s annotation %q is not a savepoint name (letters, digits, '.', '_', '-', at most 63): no savepoint was taken", v1.SavepointAnnotation, req))
	default:
		if err := r.takeSavepoint(ctx, s, req, runPipeline(q), v1.SavepointAnnotation+" annotation"); err != nil {
			return err
		}
		st.LastSavepointRequest = req
		return nil
	}
	return r.listSavepoints(ctx, s)
}

func (r *StreamQueryReconciler) listSavepoints(ctx context.Context, s *step) error {
	list, err := r.DB.Savepoints(ctx, s.tenant, s.q.QueryName())
	if err != nil {
		return err
	}
	out := make([]v1.SavepointStatus, 0, len(list))
	for _, sp := range list {
		out = append(out, v1.SavepointStatus{Name: sp.Name, Time: metav1.NewTime(sp.TakenAt.Truncate(time.Second)),
			ConfigHash: sp.ConfigHash, StateRows: sp.StateRows})
	}
	if len(out) == 0 {
		out = nil
	}
	s.q.Status.Savepoints = out
	return nil
}
