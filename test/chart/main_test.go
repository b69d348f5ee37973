package chart_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regent-mq/regent/test/kubetest"
)

// One control plane for the package: the chart's CRDs (config/crd/bases) and
// the ServiceMonitor CRD of testdata/crds are installed, so every object the
// chart can render has an API to be checked against.
var (
	k8s        client.Client
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env, err := kubetest.Start(filepath.Join("testdata", "crds"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
		}
	}()
	dir, err := os.MkdirTemp("", "regent-chart-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if kubeconfig, err = env.Kubeconfig(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Strict: a misspelt or unknown field is an error, not a silently dropped field.
	if k8s, err = client.New(env.Config, client.Options{FieldValidation: metav1.FieldValidationStrict}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

var nsSeq atomic.Int64

// namespace creates a namespace of its own for one test, with the labels
// given, and deletes it when the test ends.
func namespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("chart-%d-%s", nsSeq.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// Without a namespace controller the namespace stays Terminating, which is enough:
		// nothing else uses its name.
		if err := k8s.Delete(context.Background(), ns); err != nil {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return name
}
