package controllers_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/pipeline"
	"github.com/regent-mq/regent/test/brokertest"
)

// workers reads the Deployment, ConfigMap and Secret of query q once the
// Deployment exists.
func (h *harness) workers(q *v1.StreamQuery) (*appsv1.Deployment, *corev1.ConfigMap, *corev1.Secret) {
	h.t.Helper()
	key := client.ObjectKey{Namespace: q.Namespace, Name: q.Name + "-worker"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	eventually(h, dep, "created", func(*appsv1.Deployment) bool { return true })
	cm, sec := &corev1.ConfigMap{}, &corev1.Secret{}
	for _, o := range []client.Object{cm, sec} {
		if err := h.k8s.Get(h.ctx, key, o); err != nil {
			h.t.Fatalf("%T %s: %v", o, key, err)
		}
	}
	return dep, cm, sec
}

func ownedBy(h *harness, q *v1.StreamQuery, objs ...client.Object) {
	h.t.Helper()
	for _, o := range objs {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != q.UID || refs[0].Kind != "StreamQuery" || !ptr.Deref(refs[0].Controller, false) {
			h.t.Errorf("%T %s: owner references %+v, want StreamQuery %s as controller", o, o.GetName(), refs, q.Name)
		}
		if o.GetLabels()["streams.regent.dev/streamquery"] != q.Name || o.GetLabels()["app.kubernetes.io/managed-by"] != "regent-operator" {
			h.t.Errorf("%T %s: labels %v do not name the query", o, o.GetName(), o.GetLabels())
		}
	}
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestAQueryWithAPipelineGetsAWorkerDeploymentConfigMapAndSecretItOwns(t *testing.T) {
	h, p, _, q := registered(t, operatorOpts{}, revenuePipeline, func(q *v1.StreamQuery) {
		q.Spec.Workers = &v1.Workers{Replicas: ptr.To[int32](3), Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}
	})
	dep, cm, sec := h.workers(q)
	ownedBy(h, q, dep, cm, sec)

	// The ConfigMap's pipeline is the one registered: the worker computes
	// the same hash from the file.
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["pipeline.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	prog, err := pipeline.Load(file)
	if err != nil || prog.Hash != q.Status.RegisteredHash {
		t.Fatalf("the ConfigMap's pipeline (%v) hashes to %v, registered %q:\n%s", err, prog, q.Status.RegisteredHash, cm.Data["pipeline.yaml"])
	}

	// The token: read-write, of the query's tenant, signed with the
	// operator's key.
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(string(sec.Data["token"]), claims, func(*jwt.Token) (any, error) { return []byte(brokertest.Secret), nil },
		jwt.WithValidMethods([]string{"HS256"})); err != nil {
		t.Fatalf("the Secret's token does not verify with the signing key: %v", err)
	}
	if claims["tenant"] != h.tenant("acme") || claims["role"] != "read-write" {
		t.Fatalf("token claims %v, want tenant acme, role read-write", claims)
	}
	if exp, _ := claims.GetExpirationTime(); exp == nil || time.Until(exp.Time) < 24*time.Hour {
		t.Fatalf("token expires %v: too soon for a long-running worker", exp)
	}

	if got := *dep.Spec.Replicas; got != 3 {
		t.Fatalf("replicas %d, want 3", got)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	env := envOf(c)
	for name, want := range map[string]string{"REGENT_BROKER": p.URL, "REGENT_QUERY": "clicks", "REGENT_SOURCE": "orders",
		"REGENT_SINK": "orders.out", "REGENT_PIPELINE": "/etc/regent/pipeline.yaml"} {
		if env[name].Value != want {
			t.Errorf("env %s = %q, want %q", name, env[name].Value, want)
		}
	}
	if ref := env["REGENT_TOKEN"].ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != sec.Name || ref.SecretKeyRef.Key != "token" {
		t.Errorf("REGENT_TOKEN comes from %+v, want the Secret's token", env["REGENT_TOKEN"])
	}
	if c.Image != workerImage {
		t.Errorf("image %q, want the operator's --worker-image %q", c.Image, workerImage)
	}
	if c.Resources.Requests.Cpu().String() != "100m" {
		t.Errorf("resources %+v, want spec.workers.resources", c.Resources)
	}
	if pod.Volumes[0].ConfigMap == nil || pod.Volumes[0].ConfigMap.Name != cm.Name || c.VolumeMounts[0].MountPath != "/etc/regent" {
		t.Errorf("the pipeline ConfigMap is not mounted at /etc/regent: %+v %+v", pod.Volumes, c.VolumeMounts)
	}
	if dep.Spec.Template.Annotations["streams.regent.dev/config-hash"] != q.Status.RegisteredHash {
		t.Errorf("pod template annotations %v lack the config hash", dep.Spec.Template.Annotations)
	}
	h.wantEvent(q, "TokenMinted", fmt.Sprintf("tenant %q", h.tenant("acme")))
}

// The restricted Pod Security Standard, field by field: non-root, no
// privilege escalation, every capability dropped, RuntimeDefault seccomp;
// and a read-only root, no service account token.
func TestWorkerPodsMeetTheRestrictedPodSecurityStandard(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, revenuePipeline)
	dep, _, _ := h.workers(q)
	pod := dep.Spec.Template.Spec
	sc := pod.Containers[0].SecurityContext
	switch {
	case pod.SecurityContext == nil || !ptr.Deref(pod.SecurityContext.RunAsNonRoot, false) || ptr.Deref(pod.SecurityContext.RunAsUser, 0) == 0:
		t.Fatalf("pod security context %+v: not non-root", pod.SecurityContext)
	case pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Fatalf("pod seccomp %+v", pod.SecurityContext.SeccompProfile)
	case sc == nil || ptr.Deref(sc.AllowPrivilegeEscalation, true) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false):
		t.Fatalf("container security context %+v", sc)
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0:
		t.Fatalf("capabilities %+v, want drop ALL", sc.Capabilities)
	case ptr.Deref(pod.AutomountServiceAccountToken, true):
		t.Fatal("the worker pods mount a service account token they never use")
	}
}

func TestSpecWorkersImageOverridesTheOperatorsWorkerImage(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, revenuePipeline, func(q *v1.StreamQuery) {
		q.Spec.Workers = &v1.Workers{Image: "mirror.test/worker:2", Replicas: ptr.To[int32](1)}
	})
	dep, _, _ := h.workers(q)
	if got := dep.Spec.Template.Spec.Containers[0].Image; got != "mirror.test/worker:2" || *dep.Spec.Replicas != 1 {
		t.Fatalf("image %q, replicas %d; want spec.workers.image and 1 replica", got, *dep.Spec.Replicas)
	}
}

func TestSuspendScalesTheWorkersToZeroAndResumeRestoresThem(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, revenuePipeline, func(q *v1.StreamQuery) {
		q.Spec.Workers = &v1.Workers{Replicas: ptr.To[int32](2)}
	})
	dep, _, _ := h.workers(q)
	// envtest runs no controller manager: no pod ever becomes ready.
	q = eventually(h, q, "reporting 0 of 2 workers", func(q *v1.StreamQuery) bool {
		c := meta.FindStatusCondition(q.Status.Conditions, v1.ConditionWorkersReady)
		return q.Status.Workers != nil && q.Status.Workers.Desired == 2 && q.Status.Workers.Ready == 0 &&
			c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1.ReasonWorkersStarting
	})
	h.wantEvent(q, "WorkersStarting", "0 of 2 worker pods")

	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Suspend = true })
	eventually(h, dep, "scaled to zero", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 0 })
	q = eventually(h, q, "suspended workers", func(q *v1.StreamQuery) bool {
		c := meta.FindStatusCondition(q.Status.Conditions, v1.ConditionWorkersReady)
		return q.Status.Workers != nil && q.Status.Workers.Desired == 0 && c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1.ReasonWorkersSuspended
	})
	h.wantEvent(q, "WorkersSuspended", "scaled to zero")

	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Suspend = false })
	eventually(h, dep, "scaled back to 2", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 2 })
}

func TestAQueryWithoutAPipelineGetsNoWorkers(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{})
	// Registered means the reconcile that would have made them is done.
	for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.ConfigMap{}, &corev1.Secret{}} {
		if err := h.k8s.Get(h.ctx, client.ObjectKey{Namespace: q.Namespace, Name: q.Name + "-worker"}, o); err == nil {
			t.Fatalf("%T %s-worker exists for a query without a pipeline", o, q.Name)
		}
	}
	if q.Status.Workers != nil || meta.FindStatusCondition(q.Status.Conditions, v1.ConditionWorkersReady) != nil {
		t.Fatalf("status %+v reports workers for a query without a pipeline", q.Status)
	}
	h.noEvent(q, "TokenMinted")
}

func TestRemovingThePipelineRemovesTheWorkers(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, revenuePipeline)
	dep, cm, sec := h.workers(q)
	edit(h, q, func(q *v1.StreamQuery) {
		q.Spec.Pipeline, q.Spec.ConfigHash, q.Spec.OnConfigChange = nil, "h1", v1.OnConfigChangeReset
	})
	for _, o := range []client.Object{dep, cm, sec} {
		h.gone(o)
	}
	q = eventually(h, q, "without workers", func(q *v1.StreamQuery) bool {
		return q.Status.Workers == nil && meta.FindStatusCondition(q.Status.Conditions, v1.ConditionWorkersReady) == nil
	})
	h.wantEvent(q, "WorkersRemoved", "spec.pipeline is gone")
}

// With auth off the operator has no key: the Secret holds an empty token,
// which the worker sends as no Authorization header.
func TestWithoutASigningKeyTheWorkersTokenIsEmpty(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Auth, c.Tenancy = "off", false })
	h.startOperator(operatorOpts{tenancy: ptr.To(false), noSecret: true})
	q := h.reason(h.query(h.namespace(""), "revenue", revenuePipeline), v1.ReasonRegistered)
	_, _, sec := h.workers(q)
	if tok, ok := sec.Data["token"]; !ok || len(tok) != 0 {
		t.Fatalf("Secret data %v, want an empty token", sec.Data)
	}
}

// regent-local's operator has no worker image: it registers the query and
// reads its lag as before, and says why it runs no workers.
func TestWithoutAWorkerImageTheOperatorRunsNoWorkersAndSaysSo(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{noWorkerImage: true}, revenuePipeline)
	q = eventually(h, q, "NoWorkerImage", func(q *v1.StreamQuery) bool {
		c := meta.FindStatusCondition(q.Status.Conditions, v1.ConditionWorkersReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1.ReasonNoWorkerImage && q.Status.Lag != nil
	})
	h.wantEvent(q, v1.ReasonNoWorkerImage, "run regent-worker yourself")
	if err := h.k8s.Get(h.ctx, client.ObjectKey{Namespace: q.Namespace, Name: q.Name + "-worker"}, &appsv1.Deployment{}); err == nil {
		t.Fatal("a worker Deployment exists without a worker image")
	}
}
