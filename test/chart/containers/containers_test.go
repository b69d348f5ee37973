// Package containers_test runs the containers the chart renders in real
// containers, the way the kubelet would start them: it builds the images with
// `make images`, and runs each container with podman, from the image its pod
// spec names, with its command, its environment with Secret references
// resolved, its Secret volumes mounted, its limits, and exactly the security
// context the chart sets (read-only root filesystem, uid 65532, every
// capability dropped, no privilege escalation). The database is a real
// PostgreSQL and the cluster a real kube-apiserver, both on the host's
// loopback, which the containers share.
package containers_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/broker/pg/migrate"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/chart"
	"github.com/regent-mq/regent/test/kubetest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	images, err := buildImages()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer removeImages(images)
	code := pgtest.Run(m)
	if plane.env != nil {
		if err := plane.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
			code = 1
		}
	}
	return code
}

// plane is the package's control plane, started by the first test that
// needs one: a kube-apiserver takes seconds to start and hundreds of MiB.
var plane struct {
	once       sync.Once
	err        error
	env        *kubetest.Environment
	kubeconfig []byte
	k8s        client.Client
}

func controlPlane(t *testing.T) {
	t.Helper()
	plane.once.Do(func() {
		if plane.env, plane.err = kubetest.Start(); plane.err != nil {
			return
		}
		dir, err := os.MkdirTemp("", "regent-containers-")
		if err != nil {
			plane.err = err
			return
		}
		defer os.RemoveAll(dir)
		file, err := plane.env.Kubeconfig(dir)
		if err != nil {
			plane.err = err
			return
		}
		if plane.kubeconfig, plane.err = os.ReadFile(file); plane.err != nil {
			return
		}
		plane.k8s, plane.err = client.New(plane.env.Config, client.Options{})
	})
	if plane.err != nil {
		t.Fatal(plane.err)
	}
}

// render renders the chart with a value set and then the values given here,
// which win.
func render(t *testing.T, set chart.ValueSet, values map[string]any) chart.Objects {
	t.Helper()
	args := set.Args()
	for _, v := range []map[string]any{imageValues(), values} {
		buf, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, buf, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--values", file)
	}
	return chart.Template(t, args...)
}

// secrets are Secret data by Secret name, then key.
type secrets map[string]map[string][]byte

// renderedSecrets returns the data of the Secrets the chart rendered.
func renderedSecrets(t *testing.T, objs chart.Objects) secrets {
	t.Helper()
	out := secrets{}
	for _, obj := range objs.Kind("Secret") {
		var s corev1.Secret
		chart.Into(t, obj, &s)
		data := map[string][]byte{}
		for k, v := range s.Data {
			data[k] = v
		}
		for k, v := range s.StringData {
			data[k] = []byte(v)
		}
		out[s.Name] = data
	}
	return out
}

func TestMigrationJobMigratesAnEmptyDatabase(t *testing.T) {
	url := pgtest.EmptyURL(t)
	objs := render(t, chart.Set(t, "defaults"), map[string]any{"database": map[string]any{"url": url}})
	var job batchv1.Job
	chart.Into(t, objs.Find(t, "Job", chart.Migrate), &job)
	c := prepare(t, job.Spec.Template.Spec, "migrate", renderedSecrets(t, objs))
	c.run(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if current, err := migrate.Current(context.Background(), pool); err != nil || !current {
		t.Fatalf("after the migration Job, the database has every migration: %v (%v)", current, err)
	}
}

// broker is a broker started from the chart's Deployment.
type broker struct {
	url     string
	metrics string // the metrics listener's base URL
	secret  []byte // the signing secret, as the broker's file holds it; nil with auth off
}

// deploymentContainer prepares the only container of a rendered Deployment,
// or of a StatefulSet, whose claims a fresh pod sees as empty writable
// directories, as it sees an emptyDir.
func deploymentContainer(t *testing.T, objs chart.Objects, name string, sec secrets) container {
	t.Helper()
	for _, obj := range objs.Kind("StatefulSet") {
		if obj.GetName() != name {
			continue
		}
		var s appsv1.StatefulSet
		chart.Into(t, obj, &s)
		spec := s.Spec.Template.Spec
		for _, c := range s.Spec.VolumeClaimTemplates {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}
		return prepare(t, spec, spec.Containers[0].Name, sec)
	}
	var d appsv1.Deployment
	chart.Into(t, objs.Find(t, "Deployment", name), &d)
	return prepare(t, d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0].Name, sec)
}

// startBroker runs the broker container of the Deployment rendered from objs
// until the test ends, and waits until it is healthy. env is extra
// environment ("NAME=value") that wins over the pod spec's.
func startBroker(t *testing.T, objs chart.Objects, sec secrets, env ...string) broker {
	t.Helper()
	c := deploymentContainer(t, objs, chart.Broker, sec)
	for _, e := range env {
		name, value, _ := strings.Cut(e, "=")
		c.set(name, value)
	}
	addrs := freeAddrs(t, 2)
	addr := addrs[0]
	b := broker{url: "http://" + addr, metrics: "http://" + addrs[1]}
	if file := c.get("REGENT_JWT_SECRET_FILE"); file != "" {
		// A final line break is not part of the secret, for the broker as for the operator.
		b.secret = bytes.TrimRight(c.readFile(t, file), "\r\n")
	}
	// On the host's network, the pod's ports 6632 and 6633 may be taken: listen on free ones.
	c.set("REGENT_LISTEN", addr)
	c.set("REGENT_METRICS_LISTEN", addrs[1])
	c.start(t, b.url+"/health")
	return b
}

// freeAddrs are n distinct free loopback addresses, for servers of one
// process that listen at once.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	ports, err := pgtest.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return addrs
}

// token is what the operator does with the mounted signing secret: a
// short-lived read-write token for a tenant.
func (b broker) token(t *testing.T) string {
	t.Helper()
	if b.secret == nil {
		return ""
	}
	tok, err := auth.MintHS256(b.secret, auth.MintClaims{Subject: "chart-test", Tenant: "acme", Role: auth.ReadWrite})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var encryptionFailures = regexp.MustCompile(`(?m)^regent_encryption_failures_total (\S+)$`)

// pushSealed configures an encrypted queue, pushes one message to it, and
// returns the broker's count of payloads it failed to seal.
func (b broker) pushSealed(t *testing.T) string {
	t.Helper()
	tok := b.token(t)
	api := brokertest.At(b.url)
	if r := api.Do(t, "POST", "/api/v1/configure", tok, map[string]any{
		"queue": "chart-sealed", "options": map[string]any{"encryptionEnabled": true},
	}); r.Status != http.StatusOK {
		t.Fatalf("configure: %d %s", r.Status, r.Body)
	}
	if r := api.Do(t, "POST", "/api/v1/push", tok, map[string]any{
		"items": []any{map[string]any{"queue": "chart-sealed", "payload": map[string]any{"n": 1}}},
	}); r.Status != http.StatusCreated {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	metrics := string(brokertest.At(b.metrics).Do(t, "GET", "/metrics", "", nil).Body)
	m := encryptionFailures.FindStringSubmatch(metrics)
	if m == nil {
		t.Fatalf("/metrics has no regent_encryption_failures_total:\n%s", metrics)
	}
	return m[1]
}

func TestBrokerContainerServesFromItsDeploymentSpec(t *testing.T) {
	for _, set := range chart.ValueSets() {
		t.Run(set.Name, func(t *testing.T) {
			// Without the hook, the broker itself must migrate an empty database.
			url := pgtest.URL(t)
			if set.Name == "auth-off-startup-migrations" {
				url = pgtest.EmptyURL(t)
			}
			values := map[string]any{"database": map[string]any{"url": url}}
			sec := secrets{}
			if set.Name == "existing-secrets" {
				values = nil
				sec = existingSecrets(t, url)
			}
			objs := render(t, set, values)
			for name, data := range renderedSecrets(t, objs) {
				sec[name] = data
			}
			b := startBroker(t, objs, sec)
			if b.secret != nil {
				if r := brokertest.At(b.url).Do(t, "POST", "/api/v1/push", "", map[string]any{"items": []any{}}); r.Status != http.StatusUnauthorized {
					t.Errorf("a push without a token: %d %s, want 401", r.Status, r.Body)
				}
			}
			failures := b.pushSealed(t)
			encrypted := set.Name == "tenancy-auth" || set.Name == "existing-secrets"
			// With no key, the broker stores plaintext and counts the failure (the seed's rule),
			// which is the control that shows the count means something.
			if want := map[bool]string{true: "0", false: "1"}[encrypted]; failures != want {
				t.Errorf("encryption failures after one sealed push: %s, want %s", failures, want)
			}
		})
	}
}

// stack is the broker and operator containers of one value set, running
// against the control plane, with a StreamQuery they registered.
type stack struct {
	broker  broker
	metrics string // the operator's metrics endpoint
	dbURL   string
	query   string // the StreamQuery's name, which is its query name
	queryID string
}

var stacks atomic.Int64

// startStack runs the broker and the operator containers as the value set
// renders them, in a namespace of the tenant, and waits for a StreamQuery
// there to be Ready. brokerEnv is extra environment for the broker.
func startStack(t *testing.T, set, tenant string, brokerEnv ...string) stack {
	t.Helper()
	controlPlane(t)
	ctx := context.Background()
	st := stack{dbURL: pgtest.URL(t)}
	objs := render(t, chart.Set(t, set), map[string]any{"database": map[string]any{"url": st.dbURL}})
	sec := renderedSecrets(t, objs)
	st.broker = startBroker(t, objs, sec, brokerEnv...)

	op := deploymentContainer(t, objs, chart.Operator, sec)
	op.set("REGENT_BROKER_URL", st.broker.url)
	addrs := freeAddrs(t, 2)
	metrics, probes := addrs[0], addrs[1]
	st.metrics = "http://" + metrics + "/metrics"
	op.set("REGENT_METRICS_ADDR", metrics)
	op.set("REGENT_PROBE_ADDR", probes)
	op.mount(t, "/kube", map[string][]byte{"config": plane.kubeconfig}, 0o440)
	op.set("KUBECONFIG", "/kube/config")
	// Outside a pod, controller-runtime cannot tell which namespace to hold its
	// Lease in; one operator needs no election.
	op.set("REGENT_LEADER_ELECT", "false")
	op.start(t, "http://"+probes+"/readyz")

	// The control plane outlives each test, and with tenancy off an earlier
	// test's StreamQuery of the same name would be on the same tenant: names
	// of their own keep the tests apart in any order.
	suffix := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), ""))
	suffix = fmt.Sprintf("%s-%d", suffix[max(0, len(suffix)-30):], stacks.Add(1))
	ns := "chart-" + suffix
	if err := plane.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{"streams.regent.dev/tenant": tenant},
	}}); err != nil {
		t.Fatal(err)
	}
	if tenant != "default" {
		quota := object("TenantQuota", "", "quota-"+suffix, map[string]any{"tenant": tenant, "maxQueries": 5})
		if err := plane.k8s.Create(ctx, quota); err != nil {
			t.Fatal(err)
		}
	}
	st.query = "page-views-" + suffix
	// A freshness objective, so that the operator exports the gauge the
	// chart's RegentStreamQueryNotFresh alert selects.
	sq := object("StreamQuery", ns, st.query, map[string]any{"sourceQueue": "page-views", "configHash": "v1",
		"freshness": map[string]any{"maxLag": 1000000}})
	if err := plane.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	st.queryID = waitReady(t, plane.k8s, sq)
	return st
}

// The chart's whole point: the operator, configured as its Deployment says,
// registers a StreamQuery on the broker configured as its Deployment says,
// with tokens signed by the secret both of them mount.
func TestOperatorContainerRegistersAStreamQueryWithTheBrokerContainer(t *testing.T) {
	for set, tenant := range map[string]string{"defaults": "default", "tenancy-auth": "acme"} {
		t.Run(set, func(t *testing.T) {
			st := startStack(t, set, tenant)
			ctx := context.Background()
			pool, err := pgxpool.New(ctx, st.dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			q, err := dbtest.New(pool).StreamQuery(ctx, st.queryID)
			if err != nil || !q.Exists {
				t.Fatalf("registration %s in the database: %+v, %v", st.queryID, q, err)
			}
			if q.Tenant != tenant || q.Name != st.query {
				t.Fatalf("registered as %s/%s, want %s/%s", q.Tenant, q.Name, tenant, st.query)
			}
		})
	}
}

func object(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("streams.regent.dev/v1alpha1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// waitReady waits for the StreamQuery's Ready condition and returns its
// query id.
func waitReady(t *testing.T, k8s client.Client, sq *unstructured.Unstructured) string {
	t.Helper()
	var id string
	brokertest.Eventually(t, 60*time.Second, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sq), sq); err != nil {
			t.Fatal(err)
		}
		conditions, _, _ := unstructured.NestedSlice(sq.Object, "status", "conditions")
		for _, c := range conditions {
			c, _ := c.(map[string]any)
			if c["type"] == "Ready" && c["status"] == "True" {
				if id, _, _ = unstructured.NestedString(sq.Object, "status", "queryId"); id == "" {
					t.Fatalf("Ready without a queryId: %v", sq.Object["status"])
				}
				return nil
			}
		}
		return fmt.Errorf("StreamQuery %s is not Ready; status %v", sq.GetName(), sq.Object["status"])
	})
	return id
}

// existingSecrets are the Secrets the existing-secrets value set names, made
// as an administrator would, with each key file in another accepted form.
func existingSecrets(t *testing.T, url string) secrets {
	t.Helper()
	key := func() []byte {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	return secrets{
		"regent-pg":  {"dsn": []byte(url)},
		"regent-jwt": {"hs256": []byte(base64.StdEncoding.EncodeToString(key()) + "\n")},
		"regent-keys": {
			"current":      []byte(base64.StdEncoding.EncodeToString(key()) + "\n"),
			"retired-2025": []byte(hex.EncodeToString(key())),
			"retired-2024": key(),
		},
	}
}

// flagEnv matches the environment variable a flag falls back to, as the
// binaries' -h prints it.
var flagEnv = regexp.MustCompile(`\(env ([A-Z0-9_]+)[,)]`)

// A misspelt variable would be ignored without a word, leaving the setting
// at its default: every variable the chart sets must be one the binary reads.
func TestEveryVariableTheChartSetsIsOneTheBinaryReads(t *testing.T) {
	for _, set := range chart.ValueSets() {
		objs := render(t, set, nil)
		var pods []corev1.PodSpec
		for _, obj := range objs.Kind("Deployment") {
			var d appsv1.Deployment
			chart.Into(t, obj, &d)
			pods = append(pods, d.Spec.Template.Spec)
		}
		for _, obj := range objs.Kind("Job") {
			var j batchv1.Job
			chart.Into(t, obj, &j)
			pods = append(pods, j.Spec.Template.Spec)
		}
		for _, pod := range pods {
			for _, c := range pod.Containers {
				reads := map[string]bool{}
				for _, m := range flagEnv.FindAllStringSubmatch(usageRun(t, c.Image).output, -1) {
					reads[m[1]] = true
				}
				for _, e := range c.Env {
					// Variables of the Go runtime come from extraEnv and are the user's.
					if strings.HasPrefix(e.Name, "GO") {
						continue
					}
					if !reads[e.Name] {
						t.Errorf("%s: container %s sets %s, which %s does not read", set.Name, c.Name, e.Name, c.Image)
					}
				}
			}
		}
	}
}

// The images are the chart's contract as much as its templates: each holds
// only its binary, where the pod spec calls it, the CA bundle and the entry of
// the user the pod runs as, and runs as that user when no pod spec says so.
func TestImagesHoldOnlyTheBinaryTheCABundleAndTheChartsUser(t *testing.T) {
	objs := render(t, chart.Set(t, "defaults"), nil)
	var values struct {
		PodSecurityContext corev1.PodSecurityContext `json:"podSecurityContext"`
	}
	buf, err := os.ReadFile(filepath.Join(chart.Dir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(buf, &values); err != nil {
		t.Fatal(err)
	}
	user := fmt.Sprintf("%d:%d", *values.PodSecurityContext.RunAsUser, *values.PodSecurityContext.RunAsGroup)
	for _, name := range []string{chart.Broker, chart.Operator} {
		var d appsv1.Deployment
		chart.Into(t, objs.Find(t, "Deployment", name), &d)
		c := d.Spec.Template.Spec.Containers[0]
		var inspect []struct {
			Size   int64
			Config struct {
				User       string
				Entrypoint []string
			}
		}
		if err := json.Unmarshal([]byte(podman(t, "image", "inspect", c.Image)), &inspect); err != nil || len(inspect) != 1 {
			t.Fatalf("podman image inspect %s: %v", c.Image, err)
		}
		t.Logf("%s: %.1f MiB", c.Image, float64(inspect[0].Size)/(1<<20))
		if got := inspect[0].Config.User; got != user {
			t.Errorf("%s runs as %q, want %q, the chart's user", c.Image, got, user)
		}
		if got := inspect[0].Config.Entrypoint; !reflect.DeepEqual(got, c.Command[:1]) {
			t.Errorf("%s has the entrypoint %q; the chart calls %q", c.Image, got, c.Command[0])
		}

		files := imageFiles(t, c.Image)
		var names []string
		for name := range files {
			names = append(names, name)
		}
		sort.Strings(names)
		want := []string{"etc/group", "etc/passwd", "etc/ssl/certs/ca-certificates.crt", strings.TrimPrefix(c.Command[0], "/")}
		sort.Strings(want)
		if !reflect.DeepEqual(names, want) {
			t.Errorf("%s holds the files %q, want %q", c.Image, names, want)
		}
		// Go's os/user, and tools that print a process's user, look the uid up here.
		if uid, gid, _ := strings.Cut(user, ":"); !regexp.MustCompile(`(?m)^\w+:x:` + uid + `:` + gid + `:`).Match(files["etc/passwd"]) {
			t.Errorf("%s has no /etc/passwd entry for %s:\n%s", c.Image, user, files["etc/passwd"])
		}
		if !bytes.Contains(files["etc/ssl/certs/ca-certificates.crt"], []byte("BEGIN CERTIFICATE")) {
			t.Errorf("%s has no certificate in its CA bundle", c.Image)
		}
	}
}
