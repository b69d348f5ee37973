package controllers

// The workers of a StreamQuery with a pipeline: a Deployment of
// regent-worker, a ConfigMap holding the pipeline and a Secret holding the
// workers' broker token, each owned by the StreamQuery (so deleting it
// collects them) and labelled by it.
//
// The ConfigMap and the Deployment are written with server-side apply at
// every reconcile of a registered query: an apply that changes nothing
// changes nothing, and the operator needs no cache of ConfigMaps. The
// Secret is read past the cache first, so that the operator never caches
// (nor may list) the Secrets of the cluster, and a token is minted only
// when there is none, the tenant changed, or it is half way to expiry.
// The pod template carries the config hash and the token's expiry, so a
// new pipeline or a new token rolls the pods: environment variables taken
// from a ConfigMap or Secret are read only at a container's start.

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsac "k8s.io/client-go/applyconfigurations/apps/v1"
	coreac "k8s.io/client-go/applyconfigurations/core/v1"
	metaac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/api/auth"
)

// The operator's RBAC for workers: it applies (creates and patches) their
// Deployments, ConfigMaps and Secrets, watches only the Deployments, whose
// readiness it reports, reads only the Secrets it wrote, by name, and
// deletes all three when a query loses its pipeline.
//
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch;delete

const (
	fieldOwner = "regent-operator"
	// QueryLabel on a worker's Deployment, ConfigMap, Secret and pods names
	// its StreamQuery.
	QueryLabel = "streams.regent.dev/streamquery"
	// ManagedBy is app.kubernetes.io/managed-by on everything the operator
	// makes; its cache of Deployments sees only those.
	ManagedBy = "regent-operator"

	pipelineKey = "pipeline.yaml"
	tokenKey    = "token"
	pipelineDir = "/etc/regent"
	metricsPort = 8080

	// tokenTTL is a worker token's lifetime; it is minted again, and the
	// pods rolled, once less than half of it remains.
	tokenTTL = 30 * 24 * time.Hour
	// Annotations on the Secret, saying what its token was minted for.
	tokenTenantAnnotation  = "streams.regent.dev/token-tenant"
	tokenExpiresAnnotation = "streams.regent.dev/token-expires"
	// configHashAnnotation on the pod template rolls the pods on a new
	// pipeline.
	configHashAnnotation = "streams.regent.dev/config-hash"
)

// workersName names a query's Deployment, ConfigMap and Secret.
func workersName(q *v1.StreamQuery) string { return q.Name + "-worker" }

// wantsWorkers says whether the operator runs the query's workers.
func wantsWorkers(q *v1.StreamQuery) bool { return q.Spec.Pipeline != nil || q.Spec.SQL != "" }

// workerLabels are the query's own labels, so that whatever selects the
// query selects its workers too, and the operator's.
func workerLabels(q *v1.StreamQuery) map[string]string {
	l := map[string]string{}
	for k, v := range q.Labels {
		l[k] = v
	}
	for k, v := range selectorLabels(q) {
		l[k] = v
	}
	l["app.kubernetes.io/managed-by"] = ManagedBy
	return l
}

func selectorLabels(q *v1.StreamQuery) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "regent-worker", QueryLabel: q.Name}
}

func ownerRef(q *v1.StreamQuery) *metaac.OwnerReferenceApplyConfiguration {
	return metaac.OwnerReference().WithAPIVersion(v1.GroupVersion.String()).WithKind("StreamQuery").
		WithName(q.Name).WithUID(q.UID).WithController(true).WithBlockOwnerDeletion(true)
}

// syncWorkers runs the workers of a registered query with a pipeline, and
// removes those of a query that no longer has one.
func (r *StreamQueryReconciler) syncWorkers(ctx context.Context, s *step) error {
	q := s.q
	if !wantsWorkers(q) {
		if q.Status.Workers == nil {
			return nil // never had workers: exactly as before workers existed
		}
		return r.removeWorkers(ctx, s)
	}
	image := r.workerImage(q)
	if image == "" {
		// An operator without --worker-image (regent-local, which has no
		// kubelet): the query runs, with workers started by hand.
		msg := "the operator has no --worker-image and spec.workers.image is empty: it runs no workers for this query; run regent-worker yourself"
		if setCondition(&q.Status.Conditions, v1.ConditionWorkersReady, q.Generation, false, v1.ReasonNoWorkerImage, msg) {
			r.event(q, corev1.EventTypeWarning, v1.ReasonNoWorkerImage, "RunWorkers", msg)
		}
		return nil
	}
	if err := r.applyPipeline(ctx, q); err != nil {
		return err
	}
	expires, err := r.applyToken(ctx, s)
	if err != nil {
		return err
	}
	// A source that cannot be read holds the last decision; the rest of
	// the Deployment is applied all the same.
	scaleErr := r.autoscale(ctx, s)
	dep, err := r.applyDeployment(ctx, s, image, expires)
	if err != nil {
		return errors.Join(scaleErr, err)
	}
	r.reportWorkers(s, dep)
	return scaleErr
}

// workerImage is the query's worker image: spec.workers.image, else the
// operator's --worker-image; empty when neither is set.
func (r *StreamQueryReconciler) workerImage(q *v1.StreamQuery) string {
	if w := q.Spec.Workers; w != nil && w.Image != "" {
		return w.Image
	}
	return r.WorkerImage
}

func (r *StreamQueryReconciler) applyPipeline(ctx context.Context, q *v1.StreamQuery) error {
	body, err := yaml.Marshal(map[string]any{"pipeline": runPipeline(q)})
	if err != nil {
		return fmt.Errorf("encode the pipeline of StreamQuery %s/%s: %w", q.Namespace, q.Name, err)
	}
	cm := coreac.ConfigMap(workersName(q), q.Namespace).WithLabels(workerLabels(q)).WithOwnerReferences(ownerRef(q)).
		WithData(map[string]string{pipelineKey: string(body)})
	if err := r.Apply(ctx, cm, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply ConfigMap %s/%s: %w", q.Namespace, workersName(q), err)
	}
	return nil
}

// applyToken makes sure the Secret holds a token of the query's tenant
// that is not half way to expiry, and returns its expiry ("" when the
// operator has no signing key: the broker has auth off, and the token is
// empty).
func (r *StreamQueryReconciler) applyToken(ctx context.Context, s *step) (string, error) {
	q := s.q
	var cur corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: q.Namespace, Name: workersName(q)}, &cur)
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("read Secret %s/%s: %w", q.Namespace, workersName(q), err)
	}
	expires := cur.Annotations[tokenExpiresAnnotation]
	fresh := err == nil && cur.Annotations[tokenTenantAnnotation] == s.tenant && (expires == "") == (len(r.SigningSecret) == 0)
	if t, perr := time.Parse(time.RFC3339, expires); fresh && expires != "" && (perr != nil || time.Until(t) < tokenTTL/2) {
		fresh = false
	}
	if fresh {
		return expires, nil
	}
	token := ""
	expires = ""
	if len(r.SigningSecret) > 0 {
		now := time.Now()
		token, err = auth.MintHS256(r.SigningSecret, auth.MintClaims{
			Subject: "regent-worker:" + q.Namespace + "/" + q.Name, Tenant: s.tenant, Role: auth.ReadWrite, TTL: tokenTTL,
		})
		if err != nil {
			return "", fmt.Errorf("mint the workers' token for tenant %q: %w", s.tenant, err)
		}
		expires = now.Add(tokenTTL).UTC().Format(time.RFC3339)
	}
	sec := coreac.Secret(workersName(q), q.Namespace).WithLabels(workerLabels(q)).WithOwnerReferences(ownerRef(q)).
		WithAnnotations(map[string]string{tokenTenantAnnotation: s.tenant, tokenExpiresAnnotation: expires}).
		WithType(corev1.SecretTypeOpaque).WithStringData(map[string]string{tokenKey: token})
	if err := r.Apply(ctx, sec, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("apply Secret %s/%s: %w", q.Namespace, workersName(q), err)
	}
	r.event(q, corev1.EventTypeNormal, "TokenMinted", "RunWorkers", fmt.Sprintf(
		"Secret %s holds a new read-write broker token of tenant %q for the workers (expires %s)", workersName(q), s.tenant, orNone(expires)))
	return expires, nil
}

func orNone(expires string) string {
	if expires == "" {
		return "never: no signing key, the broker has auth off"
	}
	return expires
}

// desiredReplicas is spec.workers.replicas (1 without spec.workers), or the
// autoscaler's decision, or 0 while suspended.
func desiredReplicas(q *v1.StreamQuery) int32 {
	switch {
	case q.Spec.Suspend:
		return 0
	case autoscaleOf(q) != nil:
		return autoscaledReplicas(q, autoscaleOf(q))
	case q.Spec.Workers != nil && q.Spec.Workers.Replicas != nil:
		return *q.Spec.Workers.Replicas
	}
	return 1
}

func (r *StreamQueryReconciler) applyDeployment(ctx context.Context, s *step, image, tokenExpires string) (*appsac.DeploymentApplyConfiguration, error) {
	q, name := s.q, workersName(s.q)
	var res corev1.ResourceRequirements
	if q.Spec.Workers != nil {
		res = q.Spec.Workers.Resources
	}
	env := []*coreac.EnvVarApplyConfiguration{
		coreac.EnvVar().WithName("REGENT_BROKER").WithValue(r.WorkerBrokerURL),
		coreac.EnvVar().WithName("REGENT_TOKEN").WithValueFrom(coreac.EnvVarSource().WithSecretKeyRef(
			coreac.SecretKeySelector().WithName(name).WithKey(tokenKey))),
		coreac.EnvVar().WithName("REGENT_QUERY").WithValue(q.QueryName()),
		coreac.EnvVar().WithName("REGENT_SOURCE").WithValue(q.Spec.SourceQueue),
		coreac.EnvVar().WithName("REGENT_SINK").WithValue(q.Spec.SinkQueue),
		coreac.EnvVar().WithName("REGENT_PIPELINE").WithValue(pipelineDir + "/" + pipelineKey),
		coreac.EnvVar().WithName("REGENT_WORKER_LISTEN").WithValue(fmt.Sprintf(":%d", metricsPort)),
	}
	probe := func(path string) *coreac.ProbeApplyConfiguration {
		return coreac.Probe().WithHTTPGet(coreac.HTTPGetAction().WithPath(path).WithPort(intstr.FromString("metrics"))).
			WithPeriodSeconds(10).WithTimeoutSeconds(3)
	}
	container := coreac.Container().WithName("worker").WithImage(image).
		WithEnv(env...).
		WithPorts(coreac.ContainerPort().WithName("metrics").WithContainerPort(metricsPort).WithProtocol(corev1.ProtocolTCP)).
		WithReadinessProbe(probe("/readyz")).
		WithLivenessProbe(probe("/healthz")).
		WithResources(coreac.ResourceRequirements().WithRequests(res.Requests).WithLimits(res.Limits)).
		WithVolumeMounts(coreac.VolumeMount().WithName("pipeline").WithMountPath(pipelineDir).WithReadOnly(true)).
		// The restricted Pod Security Standard, as the broker's pods.
		WithSecurityContext(coreac.SecurityContext().WithAllowPrivilegeEscalation(false).WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).WithCapabilities(coreac.Capabilities().WithDrop("ALL")).
			WithSeccompProfile(coreac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	pod := coreac.PodTemplateSpec().WithLabels(workerLabels(q)).
		WithAnnotations(map[string]string{configHashAnnotation: q.Status.RegisteredHash, tokenExpiresAnnotation: tokenExpires}).
		WithSpec(coreac.PodSpec().
			// The worker talks to the broker only, never to Kubernetes.
			WithAutomountServiceAccountToken(false).
			// Long enough for the worker's drain (--drain, 30 s).
			WithTerminationGracePeriodSeconds(40).
			WithSecurityContext(coreac.PodSecurityContext().WithRunAsNonRoot(true).WithRunAsUser(65532).WithRunAsGroup(65532).
				WithSeccompProfile(coreac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
			WithContainers(container).
			WithVolumes(coreac.Volume().WithName("pipeline").WithConfigMap(coreac.ConfigMapVolumeSource().WithName(name))))
	running, err := pipelineJSON(runPipeline(q))
	if err != nil {
		return nil, err
	}
	dep := appsac.Deployment(name, q.Namespace).WithLabels(workerLabels(q)).WithOwnerReferences(ownerRef(q)).
		WithAnnotations(map[string]string{pipelineAnnotation: *running}).
		WithSpec(appsac.DeploymentSpec().WithReplicas(desiredReplicas(q)).
			WithSelector(metaac.LabelSelector().WithMatchLabels(selectorLabels(q))).
			WithTemplate(pod))
	if err := r.Apply(ctx, dep, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("apply Deployment %s/%s: %w", q.Namespace, name, err)
	}
	return dep, nil
}

// reportWorkers sets status.workers and WorkersReady from the Deployment
// the apply answered with, with an Event when the condition moves.
func (r *StreamQueryReconciler) reportWorkers(s *step, dep *appsac.DeploymentApplyConfiguration) {
	q := s.q
	desired := desiredReplicas(q)
	var ready int32
	if dep.Status != nil && dep.Status.ReadyReplicas != nil {
		ready = *dep.Status.ReadyReplicas
	}
	var decision *v1.AutoscaleStatus
	if q.Status.Workers != nil {
		decision = q.Status.Workers.Autoscaler
	}
	q.Status.Workers = &v1.WorkersStatus{Desired: desired, Ready: ready,
		Selector: labels.SelectorFromSet(selectorLabels(q)).String(), Autoscaler: decision}
	on, reason := ready >= desired, v1.ReasonWorkersAvailable
	msg := fmt.Sprintf("%d of %d worker pods of Deployment %s are ready", ready, desired, workersName(q))
	switch {
	case q.Spec.Suspend:
		reason, msg = v1.ReasonWorkersSuspended, fmt.Sprintf("spec.suspend: Deployment %s is scaled to zero (%d pods still ready)", workersName(q), ready)
		on = ready == 0
	case !on:
		reason = v1.ReasonWorkersStarting
	}
	if setCondition(&q.Status.Conditions, v1.ConditionWorkersReady, q.Generation, on, reason, msg) {
		r.event(q, corev1.EventTypeNormal, "Workers"+reason, "RunWorkers", msg)
	}
}

// removeWorkers deletes the workers of a query that lost its pipeline; the
// owner references would collect them only with the query itself.
func (r *StreamQueryReconciler) removeWorkers(ctx context.Context, s *step) error {
	q := s.q
	named := func(o client.Object) client.Object {
		o.SetNamespace(q.Namespace)
		o.SetName(workersName(q))
		return o
	}
	for _, o := range []client.Object{named(&appsv1.Deployment{}), named(&corev1.ConfigMap{}), named(&corev1.Secret{})} {
		if err := r.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %T %s/%s: %w", o, q.Namespace, o.GetName(), err)
		}
	}
	q.Status.Workers = nil
	meta.RemoveStatusCondition(&q.Status.Conditions, v1.ConditionWorkersReady)
	r.event(q, corev1.EventTypeNormal, "WorkersRemoved", "RunWorkers", fmt.Sprintf(
		"spec.pipeline is gone: deleted Deployment, ConfigMap and Secret %s; the query's workers are the user's own", workersName(q)))
	return nil
}
