package chart_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/regent-mq/regent/test/chart"
	"github.com/regent-mq/regent/test/kubetest"
)

// No container engine runs here, so these tests check the Dockerfile, the
// build context and `make images` against the chart, without building an
// image. test/chart/containers runs the binaries, built the way the
// Dockerfile builds them, with the chart's pod specs.

// stage is one FROM ... AS name section of the Dockerfile.
type stage struct {
	base         string
	instructions []string // the lines after FROM, continuations joined
}

func dockerfileStages(t *testing.T) (map[string]stage, map[string]string) {
	t.Helper()
	f, err := os.Open(filepath.Join(kubetest.RepoRoot(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages := map[string]stage{}
	args := map[string]string{} // ARGs before the first FROM, with their defaults
	var current string
	var line string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(text, "\\"); ok {
			line += cont + " "
			continue
		}
		line, text = "", line+text
		fields := strings.Fields(text)
		switch {
		case strings.EqualFold(fields[0], "FROM"):
			current = strings.ToLower(fields[len(fields)-1])
			base := fields[len(fields)-3]
			stages[current] = stage{base: base}
		case current == "" && strings.EqualFold(fields[0], "ARG"):
			name, def, _ := strings.Cut(fields[1], "=")
			args[name] = def
		case current != "":
			s := stages[current]
			s.instructions = append(s.instructions, text)
			stages[current] = s
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages, args
}

func TestImageTargetsRunTheChartsCommandsAsItsNonRootUser(t *testing.T) {
	stages, _ := dockerfileStages(t)
	pods := map[string]corev1.PodSpec{}
	for _, p := range podSpecs(t, chart.Template(t)) {
		pods[p.name] = p.spec
	}
	var values struct {
		PodSecurityContext corev1.PodSecurityContext `json:"podSecurityContext"`
	}
	readValues(t, &values)
	uid := strconv.FormatInt(*values.PodSecurityContext.RunAsUser, 10)
	gid := strconv.FormatInt(*values.PodSecurityContext.RunAsGroup, 10)
	for target, workload := range map[string]string{"broker": "Deployment/regent-broker", "operator": "Deployment/regent-operator"} {
		s, ok := stages[target]
		if !ok {
			t.Errorf("the Dockerfile has no target %s", target)
			continue
		}
		if !strings.HasPrefix(s.base, "gcr.io/distroless/static") || !strings.HasSuffix(s.base, ":nonroot") {
			t.Errorf("target %s is based on %s, want distroless static nonroot", target, s.base)
		}
		command := pods[workload].Containers[0].Command[0]
		want := []string{
			"USER " + uid + ":" + gid,
			`ENTRYPOINT ["` + command + `"]`,
		}
		for _, w := range want {
			if !contains(s.instructions, w) {
				t.Errorf("target %s lacks %q (the chart runs %s as user %s)", target, w, command, uid)
			}
		}
		if !containsPrefix(s.instructions, "COPY --from=build-"+target+" /out/"+target+" "+command) {
			t.Errorf("target %s does not put its binary at %s, where the chart calls it", target, command)
		}
	}
}

func contains(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

func TestImageBuildsWithTheModulesGoVersion(t *testing.T) {
	_, args := dockerfileStages(t)
	mod, err := os.ReadFile(filepath.Join(kubetest.RepoRoot(), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	if args["GO_VERSION"] != string(m[1]) {
		t.Fatalf("the Dockerfile builds with Go %q, go.mod asks for %s", args["GO_VERSION"], m[1])
	}
}

// The build context is an allow-list (.dockerignore): a package the binaries
// import from a directory left out of it would break the image build.
func TestImageBuildContextHoldsEveryPackageTheBinariesImport(t *testing.T) {
	root := kubetest.RepoRoot()
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^!([^/\s]+)/$`).FindAllStringSubmatch(string(ignore), -1) {
		allowed[m[1]] = true
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./cmd/broker", "./cmd/operator")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/regent-mq/regent/"
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		if top, _, _ := strings.Cut(rel, "/"); !allowed[top] {
			t.Errorf("the binaries import %s, but .dockerignore leaves %s/ out of the build context", pkg, top)
		}
	}
}

func TestMakeImagesTagsTheChartsDefaultImages(t *testing.T) {
	c, _ := readChartFile(t)
	cmd := exec.Command("make", "--no-print-directory", "-n", "images")
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
	for target, workload := range map[string]string{"broker": "Deployment/regent-broker", "operator": "Deployment/regent-operator"} {
		image := pods[workload].Containers[0].Image
		want := "build --target " + target + " --build-arg VERSION=" + c.AppVersion + " -t " + image + " ."
		if !strings.Contains(string(out), want) {
			t.Errorf("make images does not run `… %s`; it runs:\n%s", want, out)
		}
	}
}
