package chart_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/regent-mq/regent/test/chart"
	"github.com/regent-mq/regent/test/kubetest"
)

func TestChartPassesHelmLintWithEveryValueSet(t *testing.T) {
	for _, set := range chart.ValueSets() {
		t.Run(set.Name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chart.Dir(), "--kube-version", chart.KubeVersion}, set.Args()...)
			if _, err := chart.Run("", args...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// `helm template charts/regent`, as a user types it, renders with the helm
// `make deps` builds: that helm's default Kubernetes version passes the
// chart's kubeVersion constraint (it was v1.20, which failed it).
func TestHelmTemplateRendersTheChartWithoutAKubeVersion(t *testing.T) {
	out, err := chart.Run("", "template", chart.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kind: Deployment") {
		t.Fatalf("helm template rendered no Deployment:\n%s", out)
	}
}

func TestEachValueSetRendersExactlyItsObjects(t *testing.T) {
	common := []string{
		"ClusterRole/regent-operator", "ClusterRoleBinding/regent-operator",
		"Deployment/regent-broker", "Deployment/regent-operator",
		"Role/regent-operator-leader-election", "RoleBinding/regent-operator-leader-election",
		"Service/regent-broker", "ServiceAccount/regent-operator",
	}
	generated := []string{"Secret/regent-database", "Secret/regent-signing"}
	hook := []string{"Job/regent-migrate", "Secret/regent-migrate"}
	want := map[string][]string{
		"defaults":                    concat(common, generated, hook),
		"tenancy-auth":                concat(common, generated, hook, []string{"Secret/regent-encryption"}),
		"existing-secrets":            concat(common, []string{"Job/regent-migrate"}),
		"auth-off-startup-migrations": concat(common, generated),
		"scaling": concat(common, generated, hook, []string{
			"HorizontalPodAutoscaler/regent-broker", "PodDisruptionBudget/regent-broker",
			"Service/regent-broker-metrics", "Service/regent-operator-metrics",
			"ServiceMonitor/regent-broker", "ServiceMonitor/regent-operator",
		}),
		"spool-persistent": concat(slices.DeleteFunc(slices.Clone(common), func(s string) bool { return s == "Deployment/regent-broker" }),
			generated, hook, []string{"StatefulSet/regent-broker", "HorizontalPodAutoscaler/regent-broker"}),
		"observability": concat(common, generated, hook, []string{
			"Service/regent-broker-metrics", "Service/regent-operator-metrics", "ServiceMonitor/regent-broker", "ServiceMonitor/regent-operator",
			"ConfigMap/regent-dashboard-broker", "ConfigMap/regent-dashboard-streams", "ConfigMap/regent-dashboard-tenants",
			"PrometheusRule/regent",
		}),
	}
	for _, set := range chart.ValueSets() {
		t.Run(set.Name, func(t *testing.T) {
			w, ok := want[set.Name]
			if !ok {
				t.Fatalf("value set %s has no expected object list in this test", set.Name)
			}
			var got []string
			for _, obj := range chart.Template(t, set.Args()...) {
				got = append(got, obj.GetKind()+"/"+obj.GetName())
			}
			sort.Strings(got)
			sort.Strings(w)
			if !slices.Equal(got, w) {
				t.Fatalf("rendered objects:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(w, "\n  "))
			}
		})
	}
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// chartFile is the part of Chart.yaml these tests read.
type chartFile struct {
	Version     string `json:"version"`
	AppVersion  string `json:"appVersion"`
	KubeVersion string `json:"kubeVersion"`
}

func readChartFile(t *testing.T) (chartFile, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chart.Dir(), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c chartFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c, raw
}

// readValues decodes the chart's values.yaml into v.
func readValues(t *testing.T, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chart.Dir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultImageTagsAreTheChartAppVersion(t *testing.T) {
	c, raw := readChartFile(t)
	if c.AppVersion == "" || c.AppVersion != c.Version {
		t.Fatalf("Chart.yaml: version %q and appVersion %q must be the one release version", c.Version, c.AppVersion)
	}
	// The Makefile stamps the binaries with appVersion, read by a sed that expects this line.
	if !regexp.MustCompile(`(?m)^appVersion: "` + regexp.QuoteMeta(c.AppVersion) + `"$`).Match(raw) {
		t.Fatalf(`Chart.yaml must hold the line appVersion: "%s", which the Makefile reads`, c.AppVersion)
	}
	objs := chart.Template(t)
	images := map[string]string{}
	for _, pod := range podSpecs(t, objs) {
		for _, c := range pod.spec.Containers {
			images[pod.name+"/"+c.Name] = c.Image
		}
	}
	want := map[string]string{
		"Deployment/regent-broker/broker":     "ghcr.io/regent-mq/regent-broker:" + c.AppVersion,
		"Deployment/regent-operator/operator": "ghcr.io/regent-mq/regent-operator:" + c.AppVersion,
		"Job/regent-migrate/migrate":          "ghcr.io/regent-mq/regent-broker:" + c.AppVersion,
	}
	if !reflect.DeepEqual(images, want) {
		t.Fatalf("images %v, want %v", images, want)
	}
}

func TestDatabaseURLStaysOutOfPodSpecs(t *testing.T) {
	const dsn = "postgres://regent:s3cret@db.example:5432/regent"
	objs := chart.Template(t, "--set", "database.url="+dsn)
	for _, pod := range podSpecs(t, objs) {
		buf, err := yaml.Marshal(pod.spec)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(buf, []byte("s3cret")) {
			t.Errorf("%s spells the database URL out in its pod spec", pod.name)
		}
		for _, c := range pod.spec.Containers {
			if c.Name == "operator" || c.Name == "broker" || c.Name == "migrate" {
				if ref := env(c)["DATABASE_URL"].ValueFrom; ref == nil || ref.SecretKeyRef == nil {
					t.Errorf("%s: DATABASE_URL does not come from a Secret", pod.name)
				}
			}
		}
	}
	secret := objs.Find(t, "Secret", chart.Database)
	if got := secret.Object["stringData"].(map[string]any)["url"]; got != dsn {
		t.Fatalf("database Secret holds %v", got)
	}
}

func TestBrokerAndOperatorReadOneSigningSecret(t *testing.T) {
	for set, want := range map[string]string{
		"defaults":         chart.Signing + "/signing-secret",
		"existing-secrets": "regent-jwt/hs256",
	} {
		t.Run(set, func(t *testing.T) {
			objs := chart.Template(t, chart.Set(t, set).Args()...)
			broker := deployment(t, objs, chart.Broker)
			operator := deployment(t, objs, chart.Operator)
			if got := secretFile(t, broker, "REGENT_JWT_SECRET_FILE"); got != want {
				t.Errorf("broker verifies with %s, want %s", got, want)
			}
			if got := secretFile(t, operator, "REGENT_SIGNING_SECRET_FILE"); got != want {
				t.Errorf("operator signs with %s, want %s", got, want)
			}
		})
	}
}

func TestGeneratedSigningSecretIsLongEnoughForHS256(t *testing.T) {
	s := chart.Template(t).Find(t, "Secret", chart.Signing)
	var sec corev1.Secret
	chart.Into(t, s, &sec)
	if n := len(sec.Data["signing-secret"]); n < 32 {
		t.Fatalf("generated signing secret is %d bytes; HS256 needs at least 32", n)
	}
	again := chart.Template(t).Find(t, "Secret", chart.Signing)
	var sec2 corev1.Secret
	chart.Into(t, again, &sec2)
	if bytes.Equal(sec.Data["signing-secret"], sec2.Data["signing-secret"]) {
		t.Fatal("two renders without a cluster generated the same signing secret: it is not random")
	}
}

func TestMigrationRunsInTheHookUnlessTurnedOff(t *testing.T) {
	objs := chart.Template(t)
	if got := env(container(t, deployment(t, objs, chart.Broker), "broker"))["REGENT_MIGRATE"].Value; got != "false" {
		t.Errorf("with the hook, brokers start with REGENT_MIGRATE=%q, want false", got)
	}
	var job batchv1.Job
	chart.Into(t, objs.Find(t, "Job", chart.Migrate), &job)
	if got := job.Annotations["helm.sh/hook"]; got != "pre-install,pre-upgrade" {
		t.Errorf("migration Job hook %q, want pre-install,pre-upgrade", got)
	}
	if got := job.Spec.Template.Spec.Containers[0].Command; !slices.Equal(got, []string{"/broker", "migrate"}) {
		t.Errorf("migration Job runs %q, want /broker migrate", got)
	}

	objs = chart.Template(t, chart.Set(t, "auth-off-startup-migrations").Args()...)
	if jobs := objs.Kind("Job"); len(jobs) != 0 {
		t.Errorf("migration.hook=false still renders %s", jobs)
	}
	if got := env(container(t, deployment(t, objs, chart.Broker), "broker"))["REGENT_MIGRATE"].Value; got != "true" {
		t.Errorf("without the hook, brokers start with REGENT_MIGRATE=%q, want true", got)
	}
}

func TestTenancyAuthAndEncryptionAreSwitchedOnByValues(t *testing.T) {
	cases := map[string]struct{ auth, tenancy, keyFile string }{
		"defaults":                    {"jwt", "off", ""},
		"tenancy-auth":                {"jwt", "on", chart.Keys + "/encryption-key"},
		"existing-secrets":            {"jwt", "off", "regent-keys/current"},
		"auth-off-startup-migrations": {"off", "off", ""},
	}
	for set, want := range cases {
		t.Run(set, func(t *testing.T) {
			objs := chart.Template(t, chart.Set(t, set).Args()...)
			broker := deployment(t, objs, chart.Broker)
			e := env(container(t, broker, "broker"))
			if e["REGENT_AUTH"].Value != want.auth || e["REGENT_TENANCY"].Value != want.tenancy {
				t.Errorf("broker auth=%q tenancy=%q, want %+v", e["REGENT_AUTH"].Value, e["REGENT_TENANCY"].Value, want)
			}
			if _, ok := e["REGENT_JWT_SECRET_FILE"]; ok != (want.auth == "jwt") {
				t.Errorf("REGENT_JWT_SECRET_FILE set=%v with auth %s", ok, want.auth)
			}
			if want.keyFile == "" {
				if _, ok := e["REGENT_ENCRYPTION_KEY_FILE"]; ok {
					t.Error("encryption is off but REGENT_ENCRYPTION_KEY_FILE is set")
				}
			} else if got := secretFile(t, broker, "REGENT_ENCRYPTION_KEY_FILE"); got != want.keyFile {
				t.Errorf("encryption key file from %s, want %s", got, want.keyFile)
			}
			if got := env(container(t, deployment(t, objs, chart.Operator), "operator"))["REGENT_TENANCY"].Value; got != want.tenancy {
				t.Errorf("operator tenancy %q, want %q", got, want.tenancy)
			}
		})
	}
}

func TestRetiredEncryptionKeysAreMountedAndListed(t *testing.T) {
	broker := deployment(t, chart.Template(t, chart.Set(t, "existing-secrets").Args()...), chart.Broker)
	files := strings.Split(env(container(t, broker, "broker"))["REGENT_ENCRYPTION_OLD_KEY_FILES"].Value, ",")
	var got []string
	for _, f := range files {
		got = append(got, secretFileAt(t, broker, f))
	}
	if want := []string{"regent-keys/retired-2025", "regent-keys/retired-2024"}; !slices.Equal(got, want) {
		t.Fatalf("old key files come from %v, want %v", got, want)
	}
}

func TestGeneratedEncryptionKeyIsKeptOnUninstall(t *testing.T) {
	s := chart.Template(t, chart.Set(t, "tenancy-auth").Args()...).Find(t, "Secret", chart.Keys)
	if got := s.GetAnnotations()["helm.sh/resource-policy"]; got != "keep" {
		t.Fatalf("generated encryption key Secret has resource-policy %q, want keep", got)
	}
}

// A KEDA or HPA trigger on regent_consumer_group_lag reads it no fresher
// than the broker recomputes it: the chart must be able to set that period.
func TestBrokerLagIntervalIsAValue(t *testing.T) {
	for args, want := range map[string]string{"": "10s", "broker.lagInterval=2s": "2s"} {
		var set []string
		if args != "" {
			set = []string{"--set", args}
		}
		broker := deployment(t, chart.Template(t, set...), chart.Broker)
		if got := env(container(t, broker, "broker"))["REGENT_LAG_INTERVAL"].Value; got != want {
			t.Errorf("with %q, the broker's REGENT_LAG_INTERVAL is %q, want %q", args, got, want)
		}
	}
	refused(t, []string{"broker.lagInterval=15"}, schemaRefusal, "/broker/lagInterval")
}

func TestAutoscaledBrokerLeavesReplicasToTheHPA(t *testing.T) {
	broker := deployment(t, chart.Template(t, chart.Set(t, "scaling").Args()...), chart.Broker)
	if broker.Spec.Replicas != nil {
		t.Fatalf("autoscaled broker Deployment fixes replicas at %d: every upgrade would fight the HPA", *broker.Spec.Replicas)
	}
}

func TestCRDsInTheChartAreTheGeneratedOnes(t *testing.T) {
	generated := yamlFiles(t, filepath.Join(kubetest.RepoRoot(), "config", "crd", "bases"))
	inChart := yamlFiles(t, filepath.Join(chart.Dir(), "crds"))
	if len(generated) == 0 {
		t.Fatal("config/crd/bases holds no CRDs: run `make manifests`")
	}
	for name, want := range generated {
		got, ok := inChart[name]
		if !ok {
			t.Errorf("charts/regent/crds lacks %s: run `make manifests`", name)
		} else if !bytes.Equal(got, want) {
			t.Errorf("charts/regent/crds/%s differs from config/crd/bases: run `make manifests`", name)
		}
	}
	for name := range inChart {
		if _, ok := generated[name]; !ok {
			t.Errorf("charts/regent/crds/%s is not a generated CRD: remove it", name)
		}
	}
}

func yamlFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		if files[filepath.Base(p)], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// The chart writes the operator's rules out in rbac.yaml: together, its
// ClusterRole and its leader-election Role must grant exactly what
// controller-gen generated from the reconcilers' markers, with Leases only
// in the release namespace.
func TestOperatorRBACGrantsExactlyTheGeneratedRole(t *testing.T) {
	path := filepath.Join(kubetest.RepoRoot(), "config", "rbac", "role.yaml")
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("config/rbac/role.yaml is not generated yet: `make manifests` writes it from the kubebuilder:rbac markers")
	}
	if err != nil {
		t.Fatal(err)
	}
	var generated rbacv1.ClusterRole
	if err := yaml.Unmarshal(raw, &generated); err != nil {
		t.Fatal(err)
	}
	objs := chart.Template(t)
	var cluster rbacv1.ClusterRole
	chart.Into(t, objs.Find(t, "ClusterRole", chart.Operator), &cluster)
	var leader rbacv1.Role
	chart.Into(t, objs.Find(t, "Role", chart.Operator+"-leader-election"), &leader)
	for _, g := range grants(cluster.Rules) {
		if strings.HasPrefix(g, "coordination.k8s.io/leases:") {
			t.Errorf("the ClusterRole grants %s cluster-wide; leader election needs it in the release namespace only", g)
		}
	}
	got, want := grants(append(cluster.Rules, leader.Rules...)), grants(generated.Rules)
	if !slices.Equal(got, want) {
		t.Fatalf("the chart grants\n  %s\nthe generated role grants\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// grants flattens rules into sorted group/resource:verb lines, so that two
// roles compare equal however their rules are grouped.
func grants(rules []rbacv1.PolicyRule) []string {
	set := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					set[g+"/"+res+":"+v] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for g := range set {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

type podSpec struct {
	name string // Kind/name of the workload
	spec corev1.PodSpec
}

// podSpecs returns the pod templates of every Deployment, StatefulSet and Job.
func podSpecs(t *testing.T, objs chart.Objects) []podSpec {
	t.Helper()
	var out []podSpec
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			chart.Into(t, obj, &d)
			out = append(out, podSpec{"Deployment/" + d.Name, d.Spec.Template.Spec})
		case "StatefulSet":
			var s appsv1.StatefulSet
			chart.Into(t, obj, &s)
			// The pods get a volume per claim template, as the StatefulSet
			// controller adds it to replica 0.
			spec := s.Spec.Template.Spec
			for _, c := range s.Spec.VolumeClaimTemplates {
				spec.Volumes = append(spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-" + s.Name + "-0"}}})
			}
			out = append(out, podSpec{"StatefulSet/" + s.Name, spec})
		case "Job":
			var j batchv1.Job
			chart.Into(t, obj, &j)
			out = append(out, podSpec{"Job/" + j.Name, j.Spec.Template.Spec})
		}
	}
	return out
}

func deployment(t *testing.T, objs chart.Objects, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	chart.Into(t, objs.Find(t, "Deployment", name), &d)
	return &d
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

func env(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

// secretFile follows the file named by the environment variable of the
// Deployment's only container to the Secret and key mounted there.
func secretFile(t *testing.T, d *appsv1.Deployment, variable string) string {
	t.Helper()
	path := env(d.Spec.Template.Spec.Containers[0])[variable].Value
	if path == "" {
		t.Fatalf("Deployment %s sets no %s", d.Name, variable)
	}
	return secretFileAt(t, d, path)
}

// secretFileAt returns "<secret>/<key>" for a file path inside a Secret
// volume of the Deployment's only container.
func secretFileAt(t *testing.T, d *appsv1.Deployment, path string) string {
	t.Helper()
	pod := d.Spec.Template.Spec
	for _, m := range pod.Containers[0].VolumeMounts {
		rel, ok := strings.CutPrefix(path, m.MountPath+"/")
		if !ok {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			for _, item := range v.Secret.Items {
				if item.Path == rel {
					return v.Secret.SecretName + "/" + item.Key
				}
			}
		}
	}
	t.Fatalf("Deployment %s: %s is not a file of a mounted Secret", d.Name, path)
	return ""
}
