package v1alpha1_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/regent-mq/regent/test/kubetest"
)

// `kubectl get sq` shows each query's id by default, not only with -o wide:
// the id is what the broker's routes, its logs and the console name a query
// by.
func TestKubectlGetStreamQueriesShowsTheQueryID(t *testing.T) {
	const id = "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
	q := query(t, "with-id", source, hash)
	if err := create(t, q); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(q.Object, id, "status", "queryId"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Status().Update(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.Kubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(kubetest.AssetsDir(), "kubectl"), "--kubeconfig", kubeconfig,
		"get", "sq", "-n", ns, "with-id").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get sq: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "QUERYID") || !strings.Contains(lines[1], id) {
		t.Fatalf("kubectl get sq shows no QUERYID column with the id %s:\n%s", id, out)
	}
}
