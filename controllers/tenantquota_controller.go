package controllers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
)

// quotaFinalizer is on the TenantQuota that owns its tenant's quota row; it
// deletes the row.
const quotaFinalizer = "streams.regent.dev/quota"

// The permissions the operator needs, from which `make manifests` writes
// config/rbac/role.yaml.
//
// +kubebuilder:rbac:groups=streams.regent.dev,resources=tenantquotas,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=streams.regent.dev,resources=tenantquotas/status,verbs=update
// +kubebuilder:rbac:groups=streams.regent.dev,resources=tenantquotas/finalizers,verbs=update

// TenantQuotaReconciler writes TenantQuotas to the quota table.
type TenantQuotaReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	Config
}

func (r *TenantQuotaReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("tenantquota").
		For(&v1.TenantQuota{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deleting))).
		// Any change to a TenantQuota can change which one owns the tenant.
		Watches(&v1.TenantQuota{}, handler.EnqueueRequestsFromMapFunc(r.sameTenant)).
		// A query registered or deleted changes the count the tenant's
		// TenantQuotas show; without this it waited for their resync.
		Watches(&v1.StreamQuery{}, handler.EnqueueRequestsFromMapFunc(r.ofQueryTenant), builder.WithPredicates(registrationChanged)).
		WithOptions(options(1)).
		Complete(r)
}

func (r *TenantQuotaReconciler) sameTenant(ctx context.Context, o client.Object) []reconcile.Request {
	tq := o.(*v1.TenantQuota)
	return r.quotasOf(ctx, tq.Spec.Tenant, tq.UID)
}

func (r *TenantQuotaReconciler) ofQueryTenant(ctx context.Context, o client.Object) []reconcile.Request {
	if tenant := o.(*v1.StreamQuery).Status.Tenant; tenant != "" {
		return r.quotasOf(ctx, tenant, "")
	}
	return nil
}

// quotasOf asks to reconcile the TenantQuotas of tenant but the one with
// UID except.
func (r *TenantQuotaReconciler) quotasOf(ctx context.Context, tenant string, except types.UID) []reconcile.Request {
	var list v1.TenantQuotaList
	if err := r.List(ctx, &list, client.MatchingFields{indexQuotaTenant: tenant}); err != nil {
		logf.FromContext(ctx).Error(err, "list TenantQuotas of tenant", "tenant", tenant)
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].UID != except {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// registrationChanged passes the StreamQuery events that can change how
// many queries its tenant has registered: the query got (or changed) its
// registration, or is gone.
var registrationChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		was, is := e.ObjectOld.(*v1.StreamQuery), e.ObjectNew.(*v1.StreamQuery)
		return was.Status.QueryID != is.Status.QueryID || was.Status.Tenant != is.Status.Tenant
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// Reconcile writes one TenantQuota's grant, or reports why it does not.
func (r *TenantQuotaReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var tq v1.TenantQuota
	if err := r.Get(ctx, req.NamespacedName, &tq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	tenant := tq.Spec.Tenant
	elder, err := r.elder(ctx, &tq)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The default tenant has no row to own: nothing reads one.
	owner := elder == nil && tenant != v1.DefaultTenant

	if !tq.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(&tq, quotaFinalizer) {
			return ctrl.Result{}, nil
		}
		if owner {
			if err := r.DB.DeleteQuota(ctx, tenant); err != nil {
				return ctrl.Result{}, err
			}
			quotaUsed.DeleteLabelValues(tenant)
			quotaMax.DeleteLabelValues(tenant)
			r.event(&tq, corev1.EventTypeNormal, "Deleted", "Delete", fmt.Sprintf("deleted the quota of tenant %q: new query names are refused, existing queries keep running", tenant))
		}
		err := syncFinalizer(ctx, r.Client, &tq, quotaFinalizer, false)
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}

	if err := syncFinalizer(ctx, r.Client, &tq, quotaFinalizer, owner); err != nil {
		return ctrl.Result{}, err
	}
	before := *tq.Status.DeepCopy()
	st := &tq.Status
	st.ObservedGeneration = tq.Generation
	var registered int64
	var dbErr error
	switch {
	case elder != nil:
		st.RegisteredQueries = nil
		msg := fmt.Sprintf("TenantQuota %s, created earlier, already grants tenant %q; this one is ignored", elder.Name, tenant)
		if setReady(&st.Conditions, tq.Generation, false, v1.ReasonConflict, msg) {
			r.event(&tq, corev1.EventTypeWarning, v1.ReasonConflict, "Apply", msg)
		}
	case tenant == v1.DefaultTenant:
		registered, dbErr = r.DB.CountQueries(ctx, tenant)
		r.applied(&tq, registered, dbErr, "the default tenant is not subject to quotas; nothing was written")
	default:
		registered, dbErr = r.DB.ApplyQuota(ctx, quotaOf(&tq))
		r.applied(&tq, registered, dbErr, grant(&tq))
		if dbErr == nil {
			quotaUsed.WithLabelValues(tenant).Set(float64(registered))
			if m := tq.Spec.MaxQueries; m != nil {
				quotaMax.WithLabelValues(tenant).Set(float64(*m))
			} else {
				quotaMax.DeleteLabelValues(tenant)
			}
		}
	}
	if elder == nil && dbErr == nil {
		dbErr = r.usage(ctx, &tq)
	}
	if !equality.Semantic.DeepEqual(before, tq.Status) {
		if err := r.Status().Update(ctx, &tq); err != nil {
			return conflictOr(fmt.Errorf("update status of TenantQuota %s: %w", tq.Name, err))
		}
	}
	if dbErr != nil {
		return ctrl.Result{}, dbErr
	}
	if elder != nil {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: r.usageEvery()}, nil
}

// usageInterval is how often a TenantQuota's usage is refreshed, unless
// the resync interval is shorter.
const usageInterval = 15 * time.Second

func (r *TenantQuotaReconciler) usageEvery() time.Duration {
	return min(r.ResyncInterval, usageInterval)
}

// usage refreshes status.usage and the QuotaExceeded condition, with an
// Event when the condition changes. A limit refused within the last refresh
// (and a few seconds, so that no refusal falls between two) counts: the
// brokers record refusals once a second.
func (r *TenantQuotaReconciler) usage(ctx context.Context, tq *v1.TenantQuota) error {
	u, err := r.DB.Usage(ctx, tq.Spec.Tenant, r.usageEvery()+5*time.Second)
	if err != nil {
		return err
	}
	st := &tq.Status
	st.Usage = &v1.TenantQuotaUsage{
		Queues: u.Queues, Queries: u.Queries, StoredBytes: u.StoredBytes, StateRows: u.StateRows,
		PushedLastMinute: u.PushedLastMinute, PoppedLastMinute: u.PoppedLastMinute, RefreshedAt: metav1.Now(),
	}
	if len(u.Refusing) > 0 {
		msg := fmt.Sprintf("the brokers are refusing requests of tenant %q by %s", tq.Spec.Tenant, strings.Join(u.Refusing, ", "))
		if setCondition(&st.Conditions, v1.ConditionQuotaExceeded, tq.Generation, true, v1.ReasonRefusing, msg) {
			r.event(tq, corev1.EventTypeWarning, v1.ConditionQuotaExceeded, "Enforce", msg)
		}
		return nil
	}
	msg := fmt.Sprintf("no limit refused tenant %q recently", tq.Spec.Tenant)
	was := meta.IsStatusConditionTrue(st.Conditions, v1.ConditionQuotaExceeded)
	setCondition(&st.Conditions, v1.ConditionQuotaExceeded, tq.Generation, false, v1.ReasonWithinLimits, msg)
	if was {
		r.event(tq, corev1.EventTypeNormal, v1.ReasonWithinLimits, "Enforce", msg)
	}
	return nil
}

// quotaOf is the row a TenantQuota grants.
func quotaOf(tq *v1.TenantQuota) celldb.Quota {
	s := tq.Spec
	q := celldb.Quota{Tenant: s.Tenant, Enabled: tq.IsEnabled(), MaxQueries: s.MaxQueries, MaxQueues: s.MaxQueues,
		MaxStoredBytes: s.MaxStoredBytes, MaxStateRows: s.MaxStateRows}
	if p := s.Push; p != nil {
		q.PushMessagesPerSecond, q.PushMessagesBurst = p.MessagesPerSecond, p.MessagesBurst
		q.PushBytesPerSecond, q.PushBytesBurst = p.BytesPerSecond, p.BytesBurst
	}
	if p := s.Pop; p != nil {
		q.PopMessagesPerSecond = p.MessagesPerSecond
	}
	return q
}

// applied records the outcome of writing (or counting for) the grant.
func (r *TenantQuotaReconciler) applied(tq *v1.TenantQuota, registered int64, err error, msg string) {
	st := &tq.Status
	if err != nil {
		if setReady(&st.Conditions, tq.Generation, false, v1.ReasonDatabaseUnavailable, err.Error()) {
			r.event(tq, corev1.EventTypeWarning, v1.ReasonDatabaseUnavailable, "Apply", err.Error())
		}
		return
	}
	st.RegisteredQueries = &registered
	if setReady(&st.Conditions, tq.Generation, true, v1.ReasonApplied, msg) {
		r.event(tq, corev1.EventTypeNormal, v1.ReasonApplied, "Apply", msg)
	}
}

// grant says in words what the row grants.
func grant(tq *v1.TenantQuota) string {
	switch {
	case !tq.IsEnabled():
		return fmt.Sprintf("tenant %q is granted no new queries (disabled); existing queries keep running", tq.Spec.Tenant)
	case tq.Spec.MaxQueries == nil:
		return fmt.Sprintf("tenant %q may register any number of queries", tq.Spec.Tenant)
	default:
		return fmt.Sprintf("tenant %q may register up to %s queries", tq.Spec.Tenant, strconv.Itoa(int(*tq.Spec.MaxQueries)))
	}
}

// ownsRow says whether a TenantQuota holds its tenant's row: only the owner
// carries the finalizer.
func ownsRow(o client.Object) bool { return controllerutil.ContainsFinalizer(o, quotaFinalizer) }

// elder returns the oldest other TenantQuota for the same tenant that is
// older than tq, or nil when tq is the oldest.
func (r *TenantQuotaReconciler) elder(ctx context.Context, tq *v1.TenantQuota) (*v1.TenantQuota, error) {
	var list v1.TenantQuotaList
	if err := r.List(ctx, &list, client.MatchingFields{indexQuotaTenant: tq.Spec.Tenant}); err != nil {
		return nil, fmt.Errorf("list TenantQuotas of tenant %q: %w", tq.Spec.Tenant, err)
	}
	var oldest *v1.TenantQuota
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID != tq.UID && older(o, tq, ownsRow) && (oldest == nil || older(o, oldest, ownsRow)) {
			oldest = o
		}
	}
	return oldest, nil
}

func (r *TenantQuotaReconciler) event(tq *v1.TenantQuota, typ, reason, action, msg string) {
	r.Recorder.Eventf(tq, nil, typ, reason, action, "%s", msg)
}
