// Package chart runs the helm binary on charts/regent for tests: it renders
// the chart with the value sets under testdata/values and decodes what comes
// out. The tests in this directory check the rendered objects against a real
// kube-apiserver; test/chart/containers runs the rendered containers with
// podman, from the images `make images` builds.
//
// Helm is used as a binary, as users run it, rather than through its Go
// packages, which would add a large dependency to the module.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/regent-mq/regent/test/kubetest"
)

// Release and Namespace are what the chart is rendered as.
const (
	Release   = "regent"
	Namespace = "regent-system"
)

// here is this package's directory.
func here() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Dir is the chart's directory, charts/regent.
func Dir() string { return filepath.Join(kubetest.RepoRoot(), "charts", "regent") }

// Helm is the helm binary: REGENT_HELM (the Makefile exports it), else the
// one hack/deps.sh builds into its cache, beside the control plane.
func Helm() string {
	if h := os.Getenv("REGENT_HELM"); h != "" {
		return h
	}
	return filepath.Join(filepath.Dir(kubetest.AssetsDir()), "tools", "helm")
}

// Run runs helm with args, and KUBECONFIG set when kubeconfig is not empty.
// The error carries helm's stderr, which is where it explains a refusal.
func Run(kubeconfig string, args ...string) (string, error) {
	cmd := exec.Command(Helm(), args...)
	cmd.Env = os.Environ()
	if kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// ValueSet is one way of configuring the chart.
type ValueSet struct {
	Name string
	File string // a values file under testdata/values; empty for the chart's defaults
}

// Args are the helm flags that select the value set.
func (v ValueSet) Args() []string {
	if v.File == "" {
		return nil
	}
	return []string{"--values", v.File}
}

// ValueSets are the chart's defaults and every file in testdata/values.
func ValueSets() []ValueSet {
	files, _ := filepath.Glob(filepath.Join(here(), "testdata", "values", "*.yaml"))
	sort.Strings(files)
	sets := []ValueSet{{Name: "defaults"}}
	for _, f := range files {
		sets = append(sets, ValueSet{Name: strings.TrimSuffix(filepath.Base(f), ".yaml"), File: f})
	}
	return sets
}

// Set returns the value set of that name, failing the test when there
// is none.
func Set(t testing.TB, name string) ValueSet {
	t.Helper()
	for _, v := range ValueSets() {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no value set %q in testdata/values", name)
	return ValueSet{}
}

// KubeVersion is what `helm template` is told the cluster runs: the envtest
// control plane's version.
const KubeVersion = kubetest.K8sVersion

// Template renders the chart, hooks included, as Release in Namespace with
// the extra helm args, and fails the test when helm refuses. The extra args
// come last, so a --namespace or --kube-version among them wins.
func Template(t testing.TB, args ...string) Objects {
	t.Helper()
	out, err := TemplateErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(out)
	if err != nil {
		t.Fatalf("decode rendered chart: %v", err)
	}
	return objs
}

// TemplateErr renders the chart and returns helm's output or its refusal.
func TemplateErr(args ...string) (string, error) {
	base := []string{"template", Release, Dir(), "--namespace", Namespace, "--kube-version", KubeVersion}
	return Run("", append(base, args...)...)
}

// Objects are rendered Kubernetes objects.
type Objects []*unstructured.Unstructured

// Decode splits a multi-document YAML stream into objects, skipping empty
// documents.
func Decode(stream string) (Objects, error) {
	var objs Objects
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// Find returns the object of that kind and name, failing the test when there
// is none.
func (o Objects) Find(t testing.TB, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range o {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	t.Fatalf("no %s %q among the rendered objects:\n%s", kind, name, o)
	return nil
}

// Kind returns the objects of that kind.
func (o Objects) Kind(kind string) Objects {
	var out Objects
	for _, obj := range o {
		if obj.GetKind() == kind {
			out = append(out, obj)
		}
	}
	return out
}

// String lists the objects as kind/name, for failure messages.
func (o Objects) String() string {
	var b strings.Builder
	for _, obj := range o {
		fmt.Fprintf(&b, "  %s/%s\n", obj.GetKind(), obj.GetName())
	}
	return b.String()
}

// Into converts an object into a typed API struct (a Deployment, a Job...).
func Into(t testing.TB, obj *unstructured.Unstructured, typed any) {
	t.Helper()
	buf, err := yaml.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(buf, typed); err != nil {
		t.Fatalf("%s/%s does not decode into %T: %v", obj.GetKind(), obj.GetName(), typed, err)
	}
}

// Names of the objects the chart renders for Release.
const (
	Broker   = Release + "-broker"
	Operator = Release + "-operator"
	Migrate  = Release + "-migrate"
	Signing  = Release + "-signing"
	Database = Release + "-database"
	Keys     = Release + "-encryption"
)
