package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The broker links no Kubernetes library: the operator's share of the seam
// (broker/pg/db's Cell) once pulled the pipeline package, and with it 47
// packages of Kubernetes, into the broker, 10 MB more binary and 8 MB
// more resident memory under load.
func TestTheBrokerLinksNoKubernetesLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for dep := range strings.Lines(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/") || strings.HasPrefix(dep, "sigs.k8s.io/") {
			t.Errorf("the broker links %s", strings.TrimSpace(dep))
		}
	}
}
