package controllers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/api/streams/wire"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/controllers/registration"
	"github.com/regent-mq/regent/pipeline"
)

// queryFinalizer is on a StreamQuery with deletionPolicy Delete that owns
// its registration; it deletes the registration and its state.
const queryFinalizer = "streams.regent.dev/registration"

// The permissions the operator needs, from which `make manifests` writes
// config/rbac/role.yaml.
//
// +kubebuilder:rbac:groups=streams.regent.dev,resources=streamqueries,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=streams.regent.dev,resources=streamqueries/status,verbs=update
// +kubebuilder:rbac:groups=streams.regent.dev,resources=streamqueries/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update

// StreamQueryReconciler registers StreamQueries on the broker.
type StreamQueryReconciler struct {
	client.Client
	// APIReader reads past the cache, for the decisions that must not rest
	// on a stale copy.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Config
}

func (r *StreamQueryReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("streamquery").
		For(&v1.StreamQuery{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, // the reset token
			deleting,
		))).
		// Any change to a StreamQuery can change who wins a duplicate name.
		Watches(&v1.StreamQuery{}, handler.EnqueueRequestsFromMapFunc(r.sameName)).
		// A granted or widened quota retries the tenant's denied queries.
		Watches(&v1.TenantQuota{}, handler.EnqueueRequestsFromMapFunc(r.quotaChanged)).
		// The workers' readiness goes to the status.
		Owns(&appsv1.Deployment{}).
		// A relabelled namespace can move its queries to another tenant.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.inNamespace), builder.WithPredicates(labelsChanged)).
		WithOptions(options(r.Workers)).
		Complete(r)
}

// deleting passes the update that marks an object for deletion.
var deleting = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
	},
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// labelsChanged passes only label changes of existing objects: at start the
// StreamQueries are all listed anyway.
var labelsChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	},
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// sameName enqueues the other StreamQueries that declare o's query name,
// whose winner o's change may decide; and, when o is going away, the
// queries of its tenant still waiting for a free slot in the quota.
func (r *StreamQueryReconciler) sameName(ctx context.Context, o client.Object) []reconcile.Request {
	q := o.(*v1.StreamQuery)
	var list v1.StreamQueryList
	if err := r.List(ctx, &list, client.MatchingFields{indexQueryName: q.QueryName()}); err != nil {
		logf.FromContext(ctx).Error(err, "list StreamQueries of the same name", "queryName", q.QueryName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].UID != q.UID {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	if q.DeletionTimestamp != nil && q.Status.Tenant != "" {
		reqs = append(reqs, r.waitingOnQuota(ctx, q.Status.Tenant)...)
	}
	return reqs
}

// quotaChanged enqueues the queries a TenantQuota change may unblock.
func (r *StreamQueryReconciler) quotaChanged(ctx context.Context, o client.Object) []reconcile.Request {
	return r.waitingOnQuota(ctx, o.(*v1.TenantQuota).Spec.Tenant)
}

// waitingOnQuota lists the tenant's StreamQueries that are not Ready. It
// goes by namespace rather than by the status the queries last wrote:
// a query denied a moment before the quota row was written may not show
// its denial in the cache yet, and must not wait a whole resync for it.
func (r *StreamQueryReconciler) waitingOnQuota(ctx context.Context, tenant string) []reconcile.Request {
	queries, err := r.queriesOfTenant(ctx, tenant)
	if err != nil {
		logf.FromContext(ctx).Error(err, "list StreamQueries of tenant", "tenant", tenant)
		return nil
	}
	var reqs []reconcile.Request
	for i := range queries {
		if !meta.IsStatusConditionTrue(queries[i].Status.Conditions, v1.ConditionReady) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&queries[i])})
		}
	}
	return reqs
}

func (r *StreamQueryReconciler) inNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1.StreamQueryList
	if err := r.List(ctx, &list, client.InNamespace(o.GetName())); err != nil {
		logf.FromContext(ctx).Error(err, "list StreamQueries of namespace", "namespace", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}

// Reconcile brings one StreamQuery's registration in line with its spec.
func (r *StreamQueryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var q v1.StreamQuery
	if err := r.Get(ctx, req.NamespacedName, &q); err != nil {
		if apierrors.IsNotFound(err) {
			forgetQuery(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	tenant, err := r.tenantOf(ctx, q.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	elder, err := r.elder(ctx, &q, tenant)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Deletion comes first, before anything that could decide there is
	// nothing to do.
	if !q.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &q, tenant, elder)
	}
	if elder != nil {
		return r.duplicate(ctx, &q, tenant, elder)
	}
	if err := syncFinalizer(ctx, r.Client, &q, queryFinalizer, q.Spec.DeletionPolicy == v1.DeletionPolicyDelete); err != nil {
		return ctrl.Result{}, err
	}
	s := &step{q: &q, tenant: tenant, before: *q.Status.DeepCopy()}
	if old := q.Status.Tenant; old != "" && old != tenant {
		r.event(&q, corev1.EventTypeNormal, "TenantChanged", "Register", fmt.Sprintf(
			"namespace %s now belongs to tenant %q: the query is registered there; its registration under tenant %q is left as it is",
			q.Namespace, tenant, old))
	}
	q.Status.Tenant = tenant
	q.Status.ObservedGeneration = q.Generation
	sqlErr := compileSQL(&q)
	// A restore comes first: it decides the hash.
	if res, done, err := r.restore(ctx, s); done {
		return res, err
	}
	hash, err := configHash(&q, sqlErr)
	if err != nil {
		return r.pipelineInvalid(ctx, s, err)
	}
	if s.sink, err = r.sinkTable(ctx, s); err != nil {
		return r.sinkInvalidOrErr(ctx, s, err)
	}
	token := q.Annotations[v1.ResetTokenAnnotation]
	switch {
	case q.Status.PendingReset != nil:
		return r.resumeReset(ctx, s)
	case token != "" && token != q.Status.LastResetToken:
		return r.startReset(ctx, s, v1.PendingReset{ConfigHash: hash, Token: token})
	}
	res := r.register(ctx, s, hash, false)
	if res.Outcome == registration.Conflict {
		switch {
		case q.Spec.Upgrade() == v1.UpgradeBlock:
			res.Message += fmt.Sprintf(" (upgradeMode is Block: set it to Reset or Savepoint, or set the %s annotation, to discard the query's state)", v1.ResetTokenAnnotation)
		case q.Status.LastResetHash != hash:
			return r.upgrade(ctx, s, hash)
		default:
			res.Message += fmt.Sprintf(" (the operator already reset the query once for config hash %q and does not reset twice for one hash: "+
				"someone else registered another hash since; set the %s annotation to reset anyway)", hash, v1.ResetTokenAnnotation)
		}
	}
	return r.settle(ctx, s, res)
}

// configHash is the hash the query registers with: the restored
// savepoint's while spec.restoreFrom names it, else spec.configHash, or
// its pipeline's. A pipeline that does not compile (sqlErr, for spec.sql),
// or a configHash that is not the pipeline's, is an error the user must
// fix.
func configHash(q *v1.StreamQuery, sqlErr error) (string, error) {
	if lr := restored(q); lr != nil {
		return lr.ConfigHash, nil
	}
	if sqlErr != nil {
		return "", sqlErr
	}
	p := specPipeline(q)
	if p == nil {
		return q.Spec.ConfigHash, nil
	}
	prog, err := pipeline.Compile(*p)
	switch {
	case err != nil:
		return "", fmt.Errorf("spec.pipeline: %w", err)
	case q.Spec.ConfigHash != "" && q.Spec.ConfigHash != prog.Hash:
		return "", fmt.Errorf("spec.configHash %q is not the pipeline's config hash %q: remove it, or set it to the pipeline's", q.Spec.ConfigHash, prog.Hash)
	}
	return prog.Hash, nil
}

// pipelineInvalid reports a pipeline that cannot run, with the compiler's
// message, and registers nothing: no worker may run the query. The next
// change to the spec tries again.
func (r *StreamQueryReconciler) pipelineInvalid(ctx context.Context, s *step, err error) (ctrl.Result, error) {
	r.notReady(s.q, v1.ReasonPipelineInvalid, err.Error())
	if err := r.writeStatus(ctx, s); err != nil {
		return conflictOr(err)
	}
	observeQuery(s.q)
	return ctrl.Result{}, nil
}

// step is one reconcile of a StreamQuery that got past deletion and
// duplicates: the object, its tenant, and the status it started with.
type step struct {
	q      *v1.StreamQuery
	tenant string
	before v1.StreamQueryStatus
	hash   string // the config hash last sent to the broker
	// sink is the table sink the registrations carry (nil: none).
	sink *wire.SinkTable
	// progressRead says that this reconcile read the query's progress:
	// the autoscaler decides on nothing older.
	progressRead bool
}

func (r *StreamQueryReconciler) register(ctx context.Context, s *step, hash string, reset bool) registration.Result {
	s.hash = hash
	res := r.Broker.Register(ctx, s.tenant, registration.Request{
		Name: s.q.QueryName(), Source: s.q.Spec.SourceQueue, Sink: s.q.Spec.SinkQueue, ConfigHash: hash, Reset: reset,
		SinkTable: s.sink,
	})
	result := [...]string{registration.Registered: resultRegistered, registration.Conflict: resultConflict,
		registration.Denied: resultDenied, registration.Unavailable: resultUnavailable, registration.Invalid: resultInvalid}[res.Outcome]
	if res.Outcome == registration.Registered && reset {
		result = resultReset
	}
	registrations.WithLabelValues(result).Inc()
	return res
}

// settle records the broker's answer in the status, with an Event when
// the Ready condition moves, and decides when to look again.
func (r *StreamQueryReconciler) settle(ctx context.Context, s *step, res registration.Result) (ctrl.Result, error) {
	q, st := s.q, &s.q.Status
	var progressErr error
	switch res.Outcome {
	case registration.Registered:
		if s.before.QueryID != "" && s.before.QueryID != res.QueryID && s.before.Tenant == s.tenant {
			r.event(q, corev1.EventTypeWarning, "Recreated", "Register", fmt.Sprintf(
				"query %q of tenant %q was missing from the broker and is registered again, with empty state, as %s (was %s)",
				q.QueryName(), s.tenant, res.QueryID, s.before.QueryID))
		}
		st.QueryID = res.QueryID
		st.RegisteredHash = s.hash
		msg := fmt.Sprintf("query %q is registered for tenant %q with config hash %q", q.QueryName(), s.tenant, st.RegisteredHash)
		if setReady(&st.Conditions, q.Generation, true, v1.ReasonRegistered, msg) {
			r.event(q, corev1.EventTypeNormal, v1.ReasonRegistered, "Register", msg)
		}
		if progressErr = r.lifecycle(ctx, s); progressErr == nil {
			// The lag first, for the autoscaler; workers that cannot be
			// applied do not hide it.
			progress := r.readProgress(ctx, s)
			progressErr = errors.Join(r.syncWorkers(ctx, s), progress)
		}
	case registration.Conflict:
		r.notReady(q, v1.ReasonConfigConflict, res.Message)
	case registration.Denied:
		r.notReady(q, v1.ReasonQuotaDenied, res.Message)
	case registration.Invalid:
		// The table changed between the operator's check and the broker's.
		r.notReady(q, v1.ReasonSinkInvalid, res.Message)
	default:
		r.notReady(q, v1.ReasonBrokerUnavailable, res.Message)
	}
	if err := r.writeStatus(ctx, s); err != nil {
		return conflictOr(err)
	}
	observeQuery(q)
	switch {
	case res.Outcome == registration.Unavailable:
		return ctrl.Result{}, fmt.Errorf("register query %q of tenant %q: broker unavailable: %s", q.QueryName(), s.tenant, res.Message)
	case progressErr != nil:
		return ctrl.Result{}, progressErr
	}
	return ctrl.Result{RequeueAfter: r.resync()}, nil
}

func (r *StreamQueryReconciler) notReady(q *v1.StreamQuery, reason, msg string) {
	if setReady(&q.Status.Conditions, q.Generation, false, reason, msg) {
		r.event(q, corev1.EventTypeWarning, reason, "Register", msg)
	}
}

// readProgress fills lag, lagSeconds, stateRows and lastCycleTime from the
// database, and the Fresh condition from them.
func (r *StreamQueryReconciler) readProgress(ctx context.Context, s *step) error {
	name := s.q.QueryName()
	p, err := r.DB.Progress(ctx, s.tenant, name, consumerGroup(s.q), s.q.Spec.SourceQueue)
	switch {
	case errors.Is(err, celldb.ErrNoQuery):
		// Deleted behind the operator's back since it registered: the
		// next resync registers it again.
		return nil
	case err != nil:
		return err
	}
	st := &s.q.Status
	age := int64(0)
	if p.Oldest != nil {
		age = max(int64(time.Since(*p.Oldest)/time.Second), 0)
	}
	st.Lag, st.LagSeconds, st.StateRows = &p.Lag, &age, &p.StateRows
	s.progressRead = true
	r.fresh(s)
	st.LastCycleTime = nil
	if p.LastCycle != nil {
		t := metav1.NewTime(p.LastCycle.Truncate(time.Second))
		st.LastCycleTime = &t
	}
	return nil
}

// writeStatus writes the status when it changed, against the resource
// version read, so that a concurrent change is never overwritten.
func (r *StreamQueryReconciler) writeStatus(ctx context.Context, s *step) error {
	if equality.Semantic.DeepEqual(s.before, s.q.Status) {
		return nil
	}
	if err := r.Status().Update(ctx, s.q); err != nil {
		return fmt.Errorf("update status of StreamQuery %s/%s: %w", s.q.Namespace, s.q.Name, err)
	}
	s.before = *s.q.Status.DeepCopy()
	return nil
}

// resync is the resync interval with up to a tenth of jitter, so that
// queries created together do not stay in lockstep.
func (r *StreamQueryReconciler) resync() time.Duration {
	return r.ResyncInterval + rand.N(r.ResyncInterval/10+1)
}

func (r *StreamQueryReconciler) event(q *v1.StreamQuery, typ, reason, action, msg string) {
	r.Recorder.Eventf(q, nil, typ, reason, action, "%s", msg)
}

// conflictOr turns a write conflict into a prompt retry; any other error is
// returned for the work queue's backoff.
func conflictOr(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return retrySoon, nil
	}
	return ctrl.Result{}, err
}
