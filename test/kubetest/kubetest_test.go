package kubetest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regent-mq/regent/test/kubetest"
	"github.com/regent-mq/regent/test/nettest"
)

// The smoke test that proves the toolchain: a real control plane starts, takes
// a namespace, and gives it back.
func TestControlPlaneStoresANamespace(t *testing.T) {
	env, err := kubetest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "regent-smoke"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	var got corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "regent-smoke"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.UID == "" || got.Status.Phase != corev1.NamespaceActive {
		t.Fatalf("namespace read back as %+v", got.Status)
	}
}

// The control plane starts on a host without a default route, where
// kube-apiserver finds no address of its own to advertise: the smoke test
// passes in a network namespace with loopback alone, and with a default
// route through loopback.
func TestTheControlPlaneStartsWithoutADefaultRoute(t *testing.T) {
	for _, route := range []bool{false, true} {
		cmd := nettest.Isolated(t, route, os.Args[0], "-test.run", "^TestControlPlaneStoresANamespace$", "-test.count=1", "-test.v")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestControlPlaneStoresANamespace") {
			t.Fatalf("default route through loopback %v: %v\n%s", route, err, out)
		}
	}
}
