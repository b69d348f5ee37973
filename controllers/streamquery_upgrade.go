package controllers

// Upgrades: a new pipeline or configHash under upgradeMode Reset or
// Savepoint. The broker holds the old hash and answers 409, and the old
// workers still run the old pipeline (the ConfigMap and the Deployment are
// applied only once the query is registered). The operator then
//
//  1. drains: scales the old workers to zero and waits until their pods
//     are gone and the query's group holds no live lease (a query whose
//     workers the operator does not run has nothing to drain: its workers
//     are the user's, and it resets at once, as before upgradeMode);
//  2. under Savepoint, takes the savepoint upgrade-<metadata.generation>,
//     with the pipeline the old Deployment ran;
//  3. resets and registers the new hash (streamquery_reset.go), which
//     raises the query's reset generation;
//  4. starts the new workers, as for any registered query.
//
// Each step is safe to repeat, so an operator that dies between two of
// them takes the sequence up where it finds it.

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// upgrade moves the query to the config hash hash, which the broker
// refused for now holding another.
func (r *StreamQueryReconciler) upgrade(ctx context.Context, s *step, hash string) (ctrl.Result, error) {
	q := s.q
	if r.runsWorkers(q) {
		drained, err := r.drain(ctx, s, fmt.Sprintf("the upgrade to config hash %q", hash))
		if err != nil || !drained {
			return ctrl.Result{RequeueAfter: r.drainEvery()}, err
		}
	}
	if q.Spec.Upgrade() == v1.UpgradeSavepoint {
		old, err := r.deployedPipeline(ctx, q)
		if err != nil {
			return ctrl.Result{}, err
		}
		name := fmt.Sprintf("upgrade-%d", q.Generation)
		if err := r.takeSavepoint(ctx, s, name, old, fmt.Sprintf("upgradeMode Savepoint, before the reset to config hash %q", hash)); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.writeStatus(ctx, s); err != nil {
			return conflictOr(err)
		}
	}
	return r.startReset(ctx, s, v1.PendingReset{ConfigHash: hash})
}

// deployedPipeline is the pipeline the query's worker Deployment ran, or
// nil when there is none.
func (r *StreamQueryReconciler) deployedPipeline(ctx context.Context, q *v1.StreamQuery) (*v1.Pipeline, error) {
	var dep appsv1.Deployment
	err := r.Get(ctx, client.ObjectKey{Namespace: q.Namespace, Name: workersName(q)}, &dep)
	if apierrors.IsNotFound(err) || (err == nil && dep.Annotations[pipelineAnnotation] == "") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Deployment %s/%s: %w", q.Namespace, workersName(q), err)
	}
	p := &v1.Pipeline{}
	if err := json.Unmarshal([]byte(dep.Annotations[pipelineAnnotation]), p); err != nil {
		return nil, fmt.Errorf("decode the pipeline of Deployment %s/%s: %w", q.Namespace, workersName(q), err)
	}
	return p, nil
}
