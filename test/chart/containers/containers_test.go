// Package containers_test runs the containers the chart renders as local
// processes, the way the kubelet would start them: the command of the pod
// spec, its environment with Secret references resolved, and its Secret
// volumes written out as files. The database is a real PostgreSQL. No image
// is built: the binaries come from `go build` of the same commands the
// Dockerfile builds.
package containers_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/regent-mq/regent/broker/auth"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/chart"
	"github.com/regent-mq/regent/test/kubetest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if plane.env != nil {
		if err := plane.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// plane is the package's control plane, started by the first test that
// needs one.
var plane struct {
	once       sync.Once
	err        error
	env        *kubetest.Environment
	kubeconfig string
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
		if plane.kubeconfig, plane.err = plane.env.Kubeconfig(dir); plane.err != nil {
			return
		}
		plane.k8s, plane.err = client.New(plane.env.Config, client.Options{})
	})
	if plane.err != nil {
		t.Fatal(plane.err)
	}
}

// build compiles ./cmd/<name> for this test, static as the Dockerfile
// builds it, and returns the binary's path.
func build(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/"+name)
	cmd.Dir = kubetest.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	return bin
}

// render renders the chart with a value set and then the values given here,
// which win.
func render(t *testing.T, set chart.ValueSet, values map[string]any) chart.Objects {
	t.Helper()
	buf, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, buf, 0o600); err != nil {
		t.Fatal(err)
	}
	return chart.Template(t, append(set.Args(), "--values", file)...)
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

// process is a container of a pod spec, made ready to run here.
type process struct {
	path string
	args []string
	env  []string
}

// prepare resolves a container as the kubelet would: it writes the files of
// its Secret volumes under a temporary root, points every path in its
// environment there, and resolves its Secret references. bins maps an
// image's command (e.g. /broker) to the binary built here.
func prepare(t *testing.T, pod corev1.PodSpec, name string, sec secrets, bins map[string]string) process {
	t.Helper()
	var c *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			c = &pod.Containers[i]
		}
	}
	if c == nil {
		t.Fatalf("no container %s", name)
	}
	root := t.TempDir()
	var rewrite []string
	for _, m := range c.VolumeMounts {
		dir := filepath.Join(root, m.MountPath)
		rewrite = append(rewrite, m.MountPath+"/", dir+"/")
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.Secret == nil {
				t.Fatalf("volume %s is not a Secret", v.Name)
			}
			for _, item := range v.Secret.Items {
				data, ok := sec[v.Secret.SecretName][item.Key]
				if !ok {
					t.Fatalf("volume %s: Secret %s has no key %s", v.Name, v.Secret.SecretName, item.Key)
				}
				write(t, filepath.Join(dir, item.Path), data)
			}
		}
	}
	paths := strings.NewReplacer(rewrite...)
	var env []string
	for _, e := range c.Env {
		value := paths.Replace(e.Value)
		switch ref := e.ValueFrom; {
		case ref == nil:
		case ref.SecretKeyRef != nil:
			data, ok := sec[ref.SecretKeyRef.Name][ref.SecretKeyRef.Key]
			if !ok {
				t.Fatalf("env %s: Secret %s has no key %s", e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
			}
			value = string(data)
		case ref.ResourceFieldRef != nil && ref.ResourceFieldRef.Resource == "limits.memory" && ref.ResourceFieldRef.Divisor.IsZero():
			limit, ok := c.Resources.Limits[corev1.ResourceMemory]
			if !ok {
				t.Fatalf("env %s: the container has no memory limit", e.Name)
			}
			value = fmt.Sprint(limit.Value()) // in bytes, as the kubelet gives it
		default:
			t.Fatalf("env %s: only secretKeyRef and limits.memory are resolved here", e.Name)
		}
		env = append(env, e.Name+"="+value)
	}
	bin, ok := bins[c.Command[0]]
	if !ok {
		t.Fatalf("container %s runs %s, which this test did not build", name, c.Command[0])
	}
	return process{path: bin, args: append(c.Command[1:], c.Args...), env: env}
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o400); err != nil {
		t.Fatal(err)
	}
}

func TestMigrationJobMigratesAnEmptyDatabase(t *testing.T) {
	url := pgtest.EmptyURL(t)
	objs := render(t, chart.Set(t, "defaults"), map[string]any{"database": map[string]any{"url": url}})
	var job batchv1.Job
	chart.Into(t, objs.Find(t, "Job", chart.Migrate), &job)
	p := prepare(t, job.Spec.Template.Spec, "migrate", renderedSecrets(t, objs), map[string]string{"/broker": build(t, "broker")})

	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the migration Job's container failed: %v\n%s", err, out)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_namespace WHERE nspname IN ('queen', 'queen_streams')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("after the migration Job, %d of the schemas queen and queen_streams exist", n)
	}
}

// broker is a broker started from the chart's Deployment.
type broker struct {
	url    string
	secret []byte // the signing secret, as the broker's file holds it; nil with auth off
}

// deploymentProcess prepares the only container of a rendered Deployment.
func deploymentProcess(t *testing.T, objs chart.Objects, name string, sec secrets, bins map[string]string) process {
	t.Helper()
	var d appsv1.Deployment
	chart.Into(t, objs.Find(t, "Deployment", name), &d)
	return prepare(t, d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0].Name, sec, bins)
}

// startBroker runs the broker container of the Deployment rendered from objs,
// with the extra environment (NAME=value) given, until the test ends, and
// waits until it is healthy.
func startBroker(t *testing.T, objs chart.Objects, sec secrets, bin string, env ...string) broker {
	t.Helper()
	p := deploymentProcess(t, objs, chart.Broker, sec, map[string]string{"/broker": bin})
	for _, e := range env {
		name, value, _ := strings.Cut(e, "=")
		p.set(name, value)
	}
	addr := freeAddr(t)
	b := broker{url: "http://" + addr}
	if file := p.get("REGENT_JWT_SECRET_FILE"); file != "" {
		// A final line break is not part of the secret, for the broker as for the operator.
		b.secret = bytes.TrimRight(readFile(t, file), "\r\n")
	}
	// The pod's own network namespace is not ours: listen on a free loopback port.
	p.set("REGENT_LISTEN", addr)
	p.start(t, b.url+"/health")
	return b
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// get returns the value of an environment variable of the process.
func (p *process) get(name string) string {
	for _, e := range p.env {
		if v, ok := strings.CutPrefix(e, name+"="); ok {
			return v
		}
	}
	return ""
}

// set replaces (or adds) an environment variable of the process.
func (p *process) set(name, value string) {
	env := []string{name + "=" + value}
	for _, e := range p.env {
		if !strings.HasPrefix(e, name+"=") {
			env = append(env, e)
		}
	}
	p.env = env
}

// start runs the process until the test ends, then stops it with SIGTERM as
// the kubelet does and expects a clean exit. It returns once ready answers 200.
func (p *process) start(t *testing.T, ready string) {
	t.Helper()
	var logs bytes.Buffer
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("stop %s: %v", p.path, err)
		}
		if err := <-exited; err != nil {
			t.Errorf("%s did not stop cleanly on SIGTERM: %v\n%s", p.path, err, logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("%s exited: %v\n%s", p.path, err, logs.String())
		default:
		}
		if resp, err := http.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not ready at %s within 30s\n%s", p.path, ready, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
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
	metrics := string(api.Do(t, "GET", "/metrics", "", nil).Body)
	m := encryptionFailures.FindStringSubmatch(metrics)
	if m == nil {
		t.Fatalf("/metrics has no regent_encryption_failures_total:\n%s", metrics)
	}
	return m[1]
}

func TestBrokerContainerServesFromItsDeploymentSpec(t *testing.T) {
	bin := build(t, "broker")
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
			b := startBroker(t, objs, sec, bin)
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

// The chart's whole point: the operator, configured as its Deployment says,
// registers a StreamQuery on the broker configured as its Deployment says,
// with tokens signed by the secret both of them mount.
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

// startStack starts the broker and the operator as the value set renders
// them, in a namespace of the tenant, and waits for a StreamQuery there to
// be Ready. brokerEnv is extra environment for the broker.
func startStack(t *testing.T, bins map[string]string, set, tenant string, brokerEnv ...string) stack {
	t.Helper()
	controlPlane(t)
	ctx := context.Background()
	st := stack{dbURL: pgtest.URL(t)}
	objs := render(t, chart.Set(t, set), map[string]any{"database": map[string]any{"url": st.dbURL}})
	sec := renderedSecrets(t, objs)
	st.broker = startBroker(t, objs, sec, bins["/broker"], brokerEnv...)

	op := deploymentProcess(t, objs, chart.Operator, sec, bins)
	op.set("REGENT_BROKER_URL", st.broker.url)
	metrics := freeAddr(t)
	st.metrics = "http://" + metrics + "/metrics"
	op.set("REGENT_METRICS_ADDR", metrics)
	probes := freeAddr(t)
	op.set("REGENT_PROBE_ADDR", probes)
	op.set("KUBECONFIG", plane.kubeconfig)
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
	sq := object("StreamQuery", ns, st.query, map[string]any{"sourceQueue": "page-views", "configHash": "v1"})
	if err := plane.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	st.queryID = waitReady(t, plane.k8s, sq)
	return st
}

func TestOperatorContainerRegistersAStreamQueryWithTheBrokerContainer(t *testing.T) {
	bins := map[string]string{"/broker": build(t, "broker"), "/operator": build(t, "operator")}
	for set, tenant := range map[string]string{"defaults": "default", "tenancy-auth": "acme"} {
		t.Run(set, func(t *testing.T) {
			st := startStack(t, bins, set, tenant)
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, st.dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var gotTenant, gotName string
			if err := conn.QueryRow(ctx, `SELECT tenant, name FROM queen_streams.queries WHERE id = $1`, st.queryID).Scan(&gotTenant, &gotName); err != nil {
				t.Fatalf("registration %s in the database: %v", st.queryID, err)
			}
			if gotTenant != tenant || gotName != st.query {
				t.Fatalf("registered as %s/%s, want %s/%s", gotTenant, gotName, tenant, st.query)
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
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sq), sq); err != nil {
			t.Fatal(err)
		}
		conditions, _, _ := unstructured.NestedSlice(sq.Object, "status", "conditions")
		for _, c := range conditions {
			c, _ := c.(map[string]any)
			if c["type"] == "Ready" && c["status"] == "True" {
				id, _, _ := unstructured.NestedString(sq.Object, "status", "queryId")
				if id == "" {
					t.Fatalf("Ready without a queryId: %v", sq.Object["status"])
				}
				return id
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("StreamQuery %s not Ready within 60s; status %v", sq.GetName(), sq.Object["status"])
		}
		time.Sleep(200 * time.Millisecond)
	}
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
var flagEnv = regexp.MustCompile(`\(env ([A-Z0-9_]+)\)`)

// A misspelt variable would be ignored without a word, leaving the setting
// at its default: every variable the chart sets must be one the binary reads.
func TestEveryVariableTheChartSetsIsOneTheBinaryReads(t *testing.T) {
	known := map[string]map[string]bool{}
	for _, name := range []string{"broker", "operator"} {
		if _, err := os.Stat(filepath.Join(kubetest.RepoRoot(), "cmd", name)); err != nil {
			t.Logf("cmd/%s is not there yet: its variables are not checked", name)
			continue
		}
		out, _ := exec.Command(build(t, name), "-h").CombinedOutput()
		known["/"+name] = map[string]bool{}
		for _, m := range flagEnv.FindAllStringSubmatch(string(out), -1) {
			known["/"+name][m[1]] = true
		}
		if len(known["/"+name]) == 0 {
			t.Fatalf("%s -h lists no environment variables:\n%s", name, out)
		}
	}
	for _, set := range chart.ValueSets() {
		objs := chart.Template(t, set.Args()...)
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
				reads, ok := known[c.Command[0]]
				if !ok {
					continue
				}
				for _, e := range c.Env {
					// Variables of the Go runtime come from extraEnv and are the user's.
					if strings.HasPrefix(e.Name, "GO") {
						continue
					}
					if !reads[e.Name] {
						t.Errorf("%s: container %s sets %s, which %s does not read", set.Name, c.Name, e.Name, c.Command[0])
					}
				}
			}
		}
	}
}
