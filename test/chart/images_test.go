package chart_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/regent-mq/regent/test/chart"
	"github.com/regent-mq/regent/test/kubetest"
)

// These tests check the Dockerfile and `make images` against the chart
// without a container engine. test/chart/containers builds the images and
// runs them with podman, under the chart's pod specs.

// A base image would have to be pulled from a registry, which no build here
// can reach, and which the images have no use for: every stage starts from
// scratch or from an earlier stage.
func TestImagesAreBuiltFromScratch(t *testing.T) {
	f, err := os.Open(filepath.Join(kubetest.RepoRoot(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages := map[string]bool{"scratch": true}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") {
			continue
		}
		// FROM [--platform=...] base [AS name]
		var args []string
		for _, f := range fields[1:] {
			if !strings.HasPrefix(f, "--") {
				args = append(args, f)
			}
		}
		if !stages[strings.ToLower(args[0])] {
			t.Errorf("the Dockerfile builds on %s, which is neither scratch nor an earlier stage", args[0])
		}
		if len(args) == 3 && strings.EqualFold(args[1], "AS") {
			stages[strings.ToLower(args[2])] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"broker", "operator", "worker"} {
		if !stages[target] {
			t.Errorf("the Dockerfile has no target %s", target)
		}
	}
}

func TestMakeImagesTagsTheChartsDefaultImages(t *testing.T) {
	c, _ := readChartFile(t)
	cmd := exec.Command("make", "--no-print-directory", "-n", "images", "CONTAINER_TOOL=podman")
	cmd.Dir = kubetest.RepoRoot()
	// A parent make's flags (-j, -k, ...) are not this make's business.
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n images: %v\n%s", err, out)
	}
	pods := map[string]corev1.PodSpec{}
	for _, p := range podSpecs(t, chart.Template(t)) {
		pods[p.name] = p.spec
	}
	images := map[string]string{}
	for target, workload := range map[string]string{"broker": "Deployment/regent-broker", "operator": "Deployment/regent-operator"} {
		images[target] = pods[workload].Containers[0].Image
	}
	// The worker image is the one the operator runs worker pods with.
	for _, e := range pods["Deployment/regent-operator"].Containers[0].Env {
		if e.Name == "REGENT_WORKER_IMAGE" {
			images["worker"] = e.Value
		}
	}
	for _, target := range []string{"broker", "operator", "worker"} {
		image := images[target]
		if !strings.HasSuffix(image, ":"+c.AppVersion) {
			t.Errorf("the chart's %s image is %s, not tagged with its appVersion %s", target, image, c.AppVersion)
		}
		want := "podman build --target " + target + " -t " + image + " ."
		if !strings.Contains(string(out), want) {
			t.Errorf("make images does not run `%s`; it runs:\n%s", want, out)
		}
	}
}
