package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// finalize handles a StreamQuery marked for deletion. Only the finalizer's
// holder does anything, and a younger duplicate never holds it, so a
// registration is deleted only by the StreamQuery that owns it.
func (r *StreamQueryReconciler) finalize(ctx context.Context, q *v1.StreamQuery, tenant string, elder *v1.StreamQuery) (ctrl.Result, error) {
	forgetQuery(client.ObjectKeyFromObject(q))
	if !controllerutil.ContainsFinalizer(q, queryFinalizer) {
		return ctrl.Result{}, nil
	}
	if elder == nil && q.Spec.DeletionPolicy == v1.DeletionPolicyDelete {
		found, err := r.DB.DeleteQuery(ctx, tenant, q.QueryName())
		if err != nil {
			return ctrl.Result{}, err
		}
		if found {
			r.event(q, corev1.EventTypeNormal, "Deleted", "Delete",
				fmt.Sprintf("deleted query %q of tenant %q and its state (deletionPolicy Delete)", q.QueryName(), tenant))
		}
	}
	err := syncFinalizer(ctx, r.Client, q, queryFinalizer, false)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// duplicate reports a StreamQuery whose tenant and query name an older
// StreamQuery already declares. It never touches the registration.
func (r *StreamQueryReconciler) duplicate(ctx context.Context, q *v1.StreamQuery, tenant string, elder *v1.StreamQuery) (ctrl.Result, error) {
	if err := syncFinalizer(ctx, r.Client, q, queryFinalizer, false); err != nil {
		return ctrl.Result{}, err
	}
	s := &step{q: q, tenant: tenant, before: *q.Status.DeepCopy()}
	st := &q.Status
	st.Tenant, st.ObservedGeneration = tenant, q.Generation
	st.QueryID, st.RegisteredHash, st.Lag, st.LagSeconds, st.StateRows, st.LastCycleTime = "", "", nil, nil, nil, nil
	meta.RemoveStatusCondition(&st.Conditions, v1.ConditionSuspended)
	meta.RemoveStatusCondition(&st.Conditions, v1.ConditionFresh)
	r.notReady(q, v1.ReasonDuplicateName, fmt.Sprintf("StreamQuery %s/%s, created earlier, already declares query %q for tenant %q; this one is ignored",
		elder.Namespace, elder.Name, q.QueryName(), tenant))
	if err := r.writeStatus(ctx, s); err != nil {
		return conflictOr(err)
	}
	observeQuery(q)
	return ctrl.Result{RequeueAfter: r.resync()}, nil
}
