package v1alpha1_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/test/kubetest"
)

// The rules of spec.workers.autoscale, each with a manifest that breaks it,
// and the /scale subresource.

func TestWorkersNeedExactlyOneOfReplicasAndAutoscale(t *testing.T) {
	rejected(t, create(t, query(t, "both", source, sink, orders, "workers: {replicas: 2, autoscale: {maxReplicas: 4}}")),
		"spec.workers needs exactly one of replicas and autoscale")
	rejected(t, create(t, query(t, "neither", source, sink, orders, "workers: {image: w:1}")),
		"spec.workers needs exactly one of replicas and autoscale")
	if err := create(t, query(t, "autoscaled", source, sink, orders, "workers: {autoscale: {maxReplicas: 4}}")); err != nil {
		t.Fatal(err)
	}
}

func TestAutoscaleMinReplicasMayNotExceedMaxReplicas(t *testing.T) {
	rejected(t, create(t, query(t, "min-over-max", source, sink, orders, "workers: {autoscale: {minReplicas: 5, maxReplicas: 4}}")),
		"autoscale.minReplicas may not exceed autoscale.maxReplicas")
}

func TestAutoscaleBoundsAreTheCRDs(t *testing.T) {
	for _, c := range []struct{ autoscale, want string }{
		{"{minReplicas: 1}", "spec.workers.autoscale.maxReplicas"},
		{"{minReplicas: 0, maxReplicas: 4}", "spec.workers.autoscale.minReplicas"},
		{"{maxReplicas: 1001}", "spec.workers.autoscale.maxReplicas"},
		{"{maxReplicas: 4, targetLagSeconds: 0}", "spec.workers.autoscale.targetLagSeconds"},
		{"{maxReplicas: 4, scaleToZeroAfter: 5s}", "scaleToZeroAfter is at least 10s"},
		{"{maxReplicas: 4, scaleToZeroAfter: soon}", "spec.workers.autoscale.scaleToZeroAfter"},
	} {
		rejected(t, create(t, query(t, "bounds", source, sink, orders, "workers: {autoscale: "+c.autoscale+"}")), c.want)
	}
}

func TestAutoscaleDefaultsToOneReplicaAndThirtySecondsOfLag(t *testing.T) {
	q := created(t, query(t, "defaults", source, sink, orders, "workers: {autoscale: {maxReplicas: 4}}"))
	a := q.Spec.Workers.Autoscale
	if a.MinReplicas != 1 || a.TargetLagSeconds != 30 || a.ScaleToZeroAfter != nil || q.Spec.Workers.Replicas != nil {
		t.Fatalf("autoscale %+v, replicas %v: want minReplicas 1, targetLagSeconds 30, no scaleToZeroAfter, no replicas", a, q.Spec.Workers.Replicas)
	}
}

// The /scale subresource reads spec.workers.replicas, status.workers.ready
// and status.workers.selector, and writes spec.workers.replicas: what
// kubectl scale, an HPA and KEDA use.
func TestTheScaleSubresourceReadsAndWritesTheWorkersReplicas(t *testing.T) {
	q := created(t, query(t, "scaled", source, sink, orders, "workers: {replicas: 2}"))
	q.Status.Workers = &v1.WorkersStatus{Desired: 2, Ready: 1, Selector: "app.kubernetes.io/name=regent-worker,streams.regent.dev/streamquery=scaled"}
	if err := k8s.Status().Update(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	var sc autoscalingv1.Scale
	if err := k8s.SubResource("scale").Get(context.Background(), q, &sc); err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 2 || sc.Status.Replicas != 1 || sc.Status.Selector != q.Status.Workers.Selector {
		t.Fatalf("scale %+v, want spec 2, status 1 and the workers' selector", sc)
	}
	sc.Spec.Replicas = 5
	if err := k8s.SubResource("scale").Update(context.Background(), q, client.WithSubResourceBody(&sc)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(q), q); err != nil {
		t.Fatal(err)
	}
	if r := q.Spec.Workers.Replicas; r == nil || *r != 5 {
		t.Fatalf("spec.workers.replicas %v after scaling to 5", r)
	}
}

// With autoscale the operator owns the replicas: a write through /scale
// (kubectl scale, an HPA, KEDA) is refused by the CRD's rule, and a read
// gets the apiserver's error naming the missing spec.workers.replicas.
func TestTheScaleSubresourceRefusesAnAutoscaledQuery(t *testing.T) {
	u := query(t, "autoscaled-scale", source, sink, orders, "workers: {autoscale: {maxReplicas: 4}}")
	if err := create(t, u); err != nil {
		t.Fatal(err)
	}
	q := &v1.StreamQuery{}
	q.SetNamespace(u.GetNamespace())
	q.SetName(u.GetName())
	var sc autoscalingv1.Scale
	rejected(t, k8s.SubResource("scale").Get(context.Background(), q, &sc), `".spec.workers.replicas" does not exist`)
	sc = autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: q.Name, Namespace: q.Namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	err := k8s.SubResource("scale").Update(context.Background(), q, client.WithSubResourceBody(&sc))
	rejected(t, err, "spec.workers needs exactly one of replicas and autoscale")
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a refused scale: %v, want 422 Invalid", err)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), q); err != nil {
		t.Fatal(err)
	}
	if q.Spec.Workers.Replicas != nil || q.Spec.Workers.Autoscale == nil {
		t.Fatalf("workers %+v after a refused scale, want autoscale and no replicas", q.Spec.Workers)
	}
}

// The README's `kubectl scale sq`, and its refusal for an autoscaled query.
func TestKubectlScaleSetsTheWorkersReplicasAndIsRefusedWithAutoscale(t *testing.T) {
	for _, u := range []*unstructured.Unstructured{
		query(t, "kubectl-scaled", source, sink, orders, "workers: {replicas: 1}"),
		query(t, "kubectl-autoscaled", source, sink, orders, "workers: {autoscale: {maxReplicas: 4}}"),
	} {
		if err := create(t, u); err != nil {
			t.Fatal(err)
		}
	}
	kubectl := kubectlIn(t)
	if out, err := kubectl("scale", "sq", "kubectl-scaled", "--replicas=2"); err != nil {
		t.Fatalf("kubectl scale: %v\n%s", err, out)
	}
	if out, err := kubectl("get", "sq", "kubectl-scaled", "-o", "jsonpath={.spec.workers.replicas}"); err != nil || out != "2" {
		t.Fatalf("spec.workers.replicas %q (%v) after kubectl scale --replicas=2", out, err)
	}
	if out, err := kubectl("scale", "sq", "kubectl-autoscaled", "--replicas=2"); err == nil || !strings.Contains(out, "spec.workers needs exactly one of replicas and autoscale") {
		t.Fatalf("kubectl scale of an autoscaled query: %v\n%s; want the CRD rule's refusal", err, out)
	}
}

// `kubectl get sq` shows the ready workers and the lag; -o wide adds the
// workers the operator asks for.
func TestKubectlGetStreamQueriesShowsTheWorkersAndTheLag(t *testing.T) {
	q := created(t, query(t, "columns", source, sink, orders, "workers: {autoscale: {maxReplicas: 4}}"))
	lag := int64(4711)
	q.Status.Lag = &lag
	q.Status.Workers = &v1.WorkersStatus{Desired: 3, Ready: 2}
	if err := k8s.Status().Update(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	kubectl := kubectlIn(t)
	for _, c := range []struct {
		wide bool
		cols []string
		vals []string
	}{
		{false, []string{"WORKERS", "LAG"}, []string{"2", "4711"}},
		{true, []string{"WORKERS", "DESIRED", "LAG"}, []string{"2", "3", "4711"}},
	} {
		args := []string{"get", "sq", "columns"}
		if c.wide {
			args = append(args, "-o", "wide")
		}
		out, err := kubectl(args...)
		if err != nil {
			t.Fatalf("kubectl get sq: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("kubectl get sq:\n%s", out)
		}
		// Columns are left-aligned under their headers; some cells are
		// empty, so the row is read at each header's offset.
		for i, col := range c.cols {
			at := strings.Index(lines[0], " "+col+" ") + 1
			var cell []string
			if at > 0 && at < len(lines[1]) {
				cell = strings.Fields(lines[1][at:])
			}
			if len(cell) == 0 || cell[0] != c.vals[i] {
				t.Errorf("wide=%t: column %s is not %s:\n%s", c.wide, col, c.vals[i], out)
			}
		}
	}
}

// kubectlIn returns a kubectl of the test's control plane, in namespace ns,
// that answers with its combined output.
func kubectlIn(t *testing.T) func(args ...string) (string, error) {
	t.Helper()
	kubeconfig, err := env.Kubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(kubetest.AssetsDir(), "kubectl"), append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...).CombinedOutput()
		return string(out), err
	}
}

// created creates u and returns it as the apiserver stored it.
func created(t *testing.T, u *unstructured.Unstructured) *v1.StreamQuery {
	t.Helper()
	if err := create(t, u); err != nil {
		t.Fatal(err)
	}
	q := &v1.StreamQuery{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), q); err != nil {
		t.Fatal(err)
	}
	return q
}
