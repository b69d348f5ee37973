// Package kube_test installs the chart on a real single-node cluster
// (test/kubestack: kubelet, containerd, kube-proxy, CoreDNS) and checks what
// only running pods show: probes, security contexts and the migration hook
// as pods, the operator under the chart's own RBAC, Services and DNS between
// operator and broker, a broker pod deleted under load, a rolling upgrade
// under load, and what an uninstall leaves.
//
// The tests share one cluster and run in the order written. They run with
// REGENT_KUBE_E2E=1 (`make e2e` sets it) as root; without it they skip.
package kube_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/chart"
	"github.com/regent-mq/regent/test/kubecluster"
	"github.com/regent-mq/regent/test/kubestack"
	"github.com/regent-mq/regent/test/kubetest"
	"github.com/regent-mq/regent/test/poll"
	"github.com/regent-mq/regent/test/pushload"
)

var (
	stack   *kubestack.Stack
	broker  string // the broker Service's URL, from the host
	token   string // an admin token signed with the chart's secret
	repo    = fmt.Sprintf("localhost/regent-kube-e2e-%d", os.Getpid())
	version string
	dir     string // the cluster's state and PostgreSQL's data
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("REGENT_KUBE_E2E") != "1" {
		fmt.Println("the cluster e2e tests need REGENT_KUBE_E2E=1 and root (make e2e)")
		return m.Run()
	}
	if err := setUp(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if stack != nil {
			fmt.Fprintln(os.Stderr, stack.Logs(3000))
			stack.Stop()
		}
		return 1
	}
	code := m.Run()
	if code != 0 {
		out, _ := stack.Kubectl("", "get", "pods,jobs,events", "-A", "-o", "wide")
		fmt.Fprintln(os.Stderr, out)
		fmt.Fprintln(os.Stderr, stack.Logs(3000))
		fmt.Fprintln(os.Stderr, "the cluster's state and logs are kept in", dir)
	}
	stack.Stop()
	removeImages()
	if code == 0 {
		os.RemoveAll(dir)
	}
	return code
}

func setUp() error {
	ctx := context.Background()
	c, err := chartVersion()
	if err != nil {
		return err
	}
	version = c
	// Images of this run's own, as test/chart/containers builds them:
	// another run's `make images` cannot retag them under us.
	cmd := exec.Command("make", "--no-print-directory", "images", "IMAGE_REPO="+repo, "CONTAINER_TOOL=podman")
	cmd.Dir = kubetest.RepoRoot()
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make images: %w\n%s", err, out)
	}
	values := filepath.Join(os.TempDir(), fmt.Sprintf("regent-kube-e2e-%d.yaml", os.Getpid()))
	defer os.Remove(values)
	body := fmt.Sprintf(`broker:
  image:
    repository: %[1]s/regent-broker
  podDisruptionBudget:
    enabled: true
operator:
  image:
    repository: %[1]s/regent-operator
  resyncInterval: 5s
worker:
  image:
    repository: %[1]s/regent-worker
`, repo)
	if err := os.WriteFile(values, []byte(body), 0o644); err != nil {
		return err
	}
	if dir, err = os.MkdirTemp("", "regent-kube-e2e-"); err != nil {
		return err
	}
	start := time.Now()
	stack, err = kubestack.Start(ctx, kubestack.Options{
		Dir:      dir,
		Images:   []string{repo + "/regent-broker:" + version, repo + "/regent-operator:" + version, repo + "/regent-worker:" + version},
		Values:   []string{values},
		Progress: os.Stdout,
	})
	if err != nil {
		return err
	}
	fmt.Printf("kube: cluster up and chart installed in %s\n", time.Since(start).Round(time.Second))
	broker = stack.BrokerURL
	sec, err := stack.Client.CoreV1().Secrets(kubestack.Namespace).Get(ctx, chart.Signing, metav1.GetOptions{})
	if err != nil {
		return err
	}
	token, err = auth.MintHS256(sec.Data["signing-secret"], auth.MintClaims{Subject: "e2e", Tenant: auth.DefaultTenant, Role: auth.Admin, TTL: time.Hour})
	return err
}

func chartVersion() (string, error) {
	buf, err := os.ReadFile(filepath.Join(chart.Dir(), "Chart.yaml"))
	if err != nil {
		return "", err
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(buf, &c); err != nil {
		return "", err
	}
	return c.AppVersion, nil
}

func removeImages() {
	out, _ := exec.Command("podman", "images", "--filter", "reference="+repo+"/*", "--format", "{{.Repository}}:{{.Tag}}").Output()
	if names := strings.Fields(string(out)); len(names) > 0 {
		_ = exec.Command("podman", append([]string{"rmi"}, names...)...).Run()
	}
}

func need(t *testing.T) {
	t.Helper()
	if stack == nil {
		t.Skip("set REGENT_KUBE_E2E=1 (make e2e) to run the cluster e2e tests")
	}
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := stack.Kubectl("", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kubectlApply applies doc, a manifest, with kubectl.
func kubectlApply(t *testing.T, doc string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", f)
}

// applyInNamespace applies doc in a namespace of its own under the
// restricted Pod Security Standard, which the test's end deletes with all
// it holds.
func applyInNamespace(t *testing.T, ns, doc string) {
	t.Helper()
	kubectlApply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+
		"\n  labels:\n    pod-security.kubernetes.io/enforce: restricted\n---\n"+doc)
	t.Cleanup(func() { _, _ = stack.Kubectl("", "delete", "namespace", ns, "--wait=true", "--timeout=120s") })
}

// The migration hook Job runs before any broker pod (they start with
// REGENT_MIGRATE=false) and helm install --wait only returns once it
// succeeded and every pod is Ready. The broker Service's /health, which
// kube-proxy may program after the pods turn Ready, kubestack.Start has
// waited for.
func TestInstallBringsEveryPodToReadyAfterTheMigrationJob(t *testing.T) {
	need(t)
	ctx := context.Background()
	pods, err := stack.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	components := map[string]int{}
	for _, p := range pods.Items {
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s/%s is %s, not Running and Ready", p.Namespace, p.Name, p.Status.Phase)
		}
		components[p.Labels["app.kubernetes.io/component"]]++
	}
	if components["broker"] != 2 || components["operator"] != 1 {
		t.Errorf("pods by component: %v, want 2 brokers and 1 operator", components)
	}
	pool, err := pgxpool.New(ctx, stack.AppDatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	migrations, err := dbtest.New(pool).Migrations(ctx)
	if err != nil {
		t.Fatalf("the migration Job left no schema: %v", err)
	}
	if len(migrations) == 0 {
		t.Error("no migration is recorded")
	}
	r := brokertest.At(broker).Do(t, "GET", "/health", brokertest.NoToken, nil)
	if r.Status != http.StatusOK {
		t.Errorf("broker Service /health = %d %s", r.Status, r.Body)
	}
}

// role.yaml is what controller-gen generates from the reconcilers'
// kubebuilder markers: every verb the operator's code says it uses. Each
// must be granted to the operator's ServiceAccount by the chart's Roles,
// as the cluster's own RBAC authorizer answers it.
func TestTheChartGrantsTheOperatorEveryVerbItUses(t *testing.T) {
	need(t)
	buf, err := os.ReadFile(filepath.Join(kubetest.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(buf, &role); err != nil {
		t.Fatal(err)
	}
	sa := "system:serviceaccount:" + kubestack.Namespace + ":" + chart.Operator
	checked := 0
	for _, rule := range role.Rules {
		for _, group := range rule.APIGroups {
			for _, res := range rule.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, verb := range rule.Verbs {
					// Leader election takes its Lease in the release namespace;
					// everything else is reconciled in any namespace.
					ns := "acme-streams"
					if resource == "leases" {
						ns = kubestack.Namespace
					}
					sar := &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{
						User:   sa,
						Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + kubestack.Namespace, "system:authenticated"},
						ResourceAttributes: &authv1.ResourceAttributes{
							Namespace: ns, Verb: verb, Group: group, Resource: resource, Subresource: sub,
						},
					}}
					got, err := stack.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if !got.Status.Allowed {
						t.Errorf("the operator's ServiceAccount may not %s %s (group %q) in %s", verb, res, group, ns)
					}
					checked++
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("role.yaml grants nothing to check")
	}
	pods, err := stack.Client.CoreV1().Pods(kubestack.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operator"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.ServiceAccountName != chart.Operator {
			t.Errorf("operator pod %s runs as ServiceAccount %q, not %q", p.Name, p.Spec.ServiceAccountName, chart.Operator)
		}
	}
}

// The samples, applied as the README says, become Ready: the operator, under
// its own ServiceAccount, reaches the broker through its Service's DNS name.
func TestTheSamplesReconcileReadyThroughTheBrokerService(t *testing.T) {
	need(t)
	kubectl(t, "apply", "-f", filepath.Join(kubetest.RepoRoot(), "config", "samples"))
	kubectl(t, "wait", "--for=condition=Ready", "streamquery", "--all", "--all-namespaces", "--timeout=120s")
	kubectl(t, "wait", "--for=condition=Ready", "tenantquota", "--all", "--timeout=60s")
	r := brokertest.At(broker).Do(t, "GET", "/streams/v1/queries", token, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("list queries = %d %s", r.Status, r.Body)
	}
	for _, q := range []string{"orders.per_minute", "clicks-per-page"} {
		if !bytes.Contains(r.Body, []byte(q)) {
			t.Errorf("the broker has no registration %s: %s", q, r.Body)
		}
	}
	logs := kubectl(t, "-n", kubestack.Namespace, "logs", "deployment/"+chart.Operator)
	if strings.Contains(logs, "forbidden") {
		t.Errorf("the operator was refused by the API server:\n%s", grep(logs, "forbidden"))
	}
}

func grep(s, word string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.Contains(sc.Text(), word) {
			b.WriteString(sc.Text() + "\n")
		}
	}
	return b.String()
}

// startLoad pushes numbered messages through the broker Service from four
// clients.
func startLoad(queue string) *pushload.Load {
	return pushload.Start([]string{broker, broker, broker, broker}, queue, token)
}

// progress waits until every client had n more pushes acknowledged.
func progress(t *testing.T, l *pushload.Load, n int) {
	t.Helper()
	l.Mark(false)
	if !l.WaitFlowing(n, 60*time.Second) {
		l.Halt()
		t.Fatalf("the load made no progress: answers %v", l.Statuses)
	}
}

// verify checks that nothing acknowledged was lost or stored twice, and
// that no push through the Service failed at all: the Service only sends
// requests to Ready pods, and a terminating broker drains its own.
func verify(t *testing.T, l *pushload.Load, during string) {
	t.Helper()
	acked, _, _ := l.Verify(t, &brokertest.Broker{URL: broker, Token: token})
	t.Logf("%d pushes acknowledged, answers %v", acked, l.Statuses)
	if len(l.Statuses) != 1 || l.Statuses["201"] == 0 {
		t.Errorf("pushes through the Service failed %s: %v\n%s", during, l.Statuses, strings.Join(l.Failures, "\n"))
	}
}

// A broker pod deleted as a node drain or `kubectl delete pod` would:
// its preStop sleep and readiness take it out of the Service before it stops
// serving, so clients of the Service see no failure, and nothing
// acknowledged is lost or stored twice.
func TestABrokerPodDeletedUnderLoadLosesNothing(t *testing.T) {
	need(t)
	l := startLoad("kube-e2e-delete")
	progress(t, l, 50)
	pods, err := stack.Client.CoreV1().Pods(kubestack.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=broker"})
	if err != nil || len(pods.Items) == 0 {
		l.Halt()
		t.Fatalf("broker pods: %v (%d)", err, len(pods.Items))
	}
	victim := pods.Items[0].Name
	kubectl(t, "-n", kubestack.Namespace, "delete", "pod", victim, "--wait=true", "--timeout=90s")
	if err := stack.WaitRollout(chart.Broker, 90*time.Second); err != nil {
		l.Halt()
		t.Fatal(err)
	}
	progress(t, l, 50)
	l.Halt()
	verify(t, l, "while "+victim+" was deleted")
}

// `kubectl rollout restart` of the brokers under load: each old pod fails
// /ready at SIGTERM, serves on through its drain grace while the endpoints
// drop it, and stops; clients of the Service see no failed request, and
// nothing acknowledged is lost or stored twice.
func TestKubectlRolloutRestartOfTheBrokersUnderLoadFailsNoRequest(t *testing.T) {
	need(t)
	before := brokerPods(t)
	l := startLoad("kube-e2e-restart")
	progress(t, l, 50)
	kubectl(t, "-n", kubestack.Namespace, "rollout", "restart", "deployment/"+chart.Broker)
	if err := stack.WaitRollout(chart.Broker, 3*time.Minute); err != nil {
		l.Halt()
		t.Fatal(err)
	}
	progress(t, l, 50)
	l.Halt()
	for name := range brokerPods(t) {
		if before[name] != "" {
			t.Errorf("broker pod %s outlived the restart", name)
		}
	}
	verify(t, l, "during kubectl rollout restart")
}

// helm upgrade with a new broker image tag and a changed value rolls every
// broker pod, through the PodDisruptionBudget and readiness, with no failed
// request.
func TestHelmUpgradeRollsTheBrokersWithNoFailedRequest(t *testing.T) {
	need(t)
	newTag := version + "-e2e-upgrade"
	if err := stack.TagImage(repo+"/regent-broker:"+version, repo+"/regent-broker:"+newTag); err != nil {
		t.Fatal(err)
	}
	before := brokerPods(t)
	l := startLoad("kube-e2e-upgrade")
	progress(t, l, 50)
	_, err := chart.Run(stack.Kubeconfig, "upgrade", kubestack.Release, chart.Dir(), "--namespace", kubestack.Namespace,
		"--reuse-values", "--set", "broker.image.tag="+newTag, "--set", "broker.logLevel=debug", "--wait", "--timeout", "5m")
	if err != nil {
		l.Halt()
		t.Fatal(err)
	}
	progress(t, l, 50)
	l.Halt()
	after := brokerPods(t)
	for name := range after {
		if before[name] != "" {
			t.Errorf("broker pod %s outlived the upgrade", name)
		}
	}
	for name, image := range after {
		if !strings.HasSuffix(image, ":"+newTag) {
			t.Errorf("broker pod %s runs %s after the upgrade", name, image)
		}
	}
	verify(t, l, "during the upgrade")
}

func brokerPods(t *testing.T) map[string]string {
	t.Helper()
	pods, err := stack.Client.CoreV1().Pods(kubestack.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=broker"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.Spec.Containers[0].Image
		}
	}
	return out
}

// A StreamQuery with a pipeline, applied with kubectl, is all it takes: the
// operator runs its worker pods (under Pod Security restricted, enforced on
// their namespace), and they fold every pushed event into the sink exactly
// once.
func TestAStreamQueryWithAPipelineRunsItsWorkerPods(t *testing.T) {
	need(t)
	const ns, events = "pipeline-e2e", 600
	applyInNamespace(t, ns, `apiVersion: streams.regent.dev/v1alpha1
kind: StreamQuery
metadata:
  name: counts
  namespace: `+ns+`
spec:
  sourceQueue: e2e.events
  sinkQueue: e2e.counts
  deletionPolicy: Delete
  pipeline:
    keyBy: "payload.key"
    eventTime: "payload.ts"
    window: {type: Tumbling, size: 60s, idleFlush: 3s}
    aggregate: [{name: count, fn: count}]
  workers:
    replicas: 2
`)
	kubectl(t, "-n", ns, "wait", "--for=condition=WorkersReady", "streamquery/counts", "--timeout=180s")
	if got := kubectl(t, "-n", ns, "get", "streamquery/counts", "-o", "jsonpath={.status.workers.ready}/{.status.workers.desired}"); got != "2/2" {
		t.Fatalf("status.workers = %s, want 2/2", got)
	}

	base := time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC).UnixMilli()
	items := make([]map[string]any, 0, events)
	for i := range events {
		items = append(items, map[string]any{
			"queue": "e2e.events", "partition": fmt.Sprintf("p%d", i%4),
			"payload": map[string]any{"key": fmt.Sprintf("k%d", i%5), "ts": base + int64(i)*1000},
		})
	}
	api := brokertest.At(broker)
	if r := api.Do(t, "POST", "/api/v1/push", token, map[string]any{"items": items}); r.Status != http.StatusCreated {
		t.Fatalf("push = %d %s", r.Status, r.Body)
	}
	counted := api.SinkCounts(t, "e2e.counts", "e2e", token, events, 120*time.Second)
	if counted != events {
		t.Fatalf("the sink counted %d events, want exactly %d; worker logs:\n%s", counted, events,
			kubectl(t, "-n", ns, "logs", "deployment/counts-worker", "--tail=50"))
	}
	// Nothing more arrives: no window was emitted twice.
	r := api.Do(t, "GET", "/api/v1/pop/queue/e2e.counts?batch=100&wait=true&timeout=3000&autoAck=true&consumerGroup=e2e", token, nil)
	if r.Status != http.StatusNoContent {
		t.Fatalf("after all %d events were counted the sink still answers %d %s", events, r.Status, r.Body)
	}
	// The owner references: deleting the StreamQuery collects its workers.
	kubectl(t, "-n", ns, "delete", "streamquery/counts", "--wait=true", "--timeout=60s")
	kubectl(t, "-n", ns, "wait", "--for=delete", "deployment/counts-worker", "configmap/counts-worker", "secret/counts-worker", "--timeout=60s")
}

// An autoscaled StreamQuery's workers scale out under a burst, count every
// event exactly once while pods come and go, and scale to zero once the
// source is quiet. The burst waits while the query is suspended, so that it
// is there at once when the workers start (one worker folds 10,000 to
// 40,000 events a second here, faster than a push loop fills the source),
// and it is large enough to outlast two of the operator's resyncs (5 s
// here) however fast the worker: the resume's first decision starts the
// workers, the next one scales them out. The log line gives the figures:
// time to scale out, peak lag, and time back to zero.
func TestAnAutoscaledStreamQueryScalesOutUnderABurstAndToZeroWhenQuiet(t *testing.T) {
	need(t)
	const ns, events, partitions = "autoscale-e2e", 600000, 8
	applyInNamespace(t, ns, `apiVersion: streams.regent.dev/v1alpha1
kind: StreamQuery
metadata:
  name: burst
  namespace: `+ns+`
spec:
  sourceQueue: e2e.burst
  sinkQueue: e2e.burst-counts
  deletionPolicy: Delete
  suspend: true
  pipeline:
    keyBy: "payload.key"
    eventTime: "payload.ts"
    window: {type: Tumbling, size: 60s, idleFlush: 3s}
    aggregate: [{name: count, fn: count}]
  workers:
    autoscale: {minReplicas: 1, maxReplicas: 4, targetLagSeconds: 5, scaleToZeroAfter: 20s}
`)
	if _, err := stack.Kubectl("", "-n", ns, "wait", "--for=jsonpath={.status.queryId}", "streamquery/burst", "--timeout=120s"); err != nil {
		t.Fatalf("the suspended query was not registered within 120 s: %v", err)
	}

	// The status at each of its changes from the burst on, as a watch
	// reports them.
	type sample struct {
		at              time.Duration
		desired, ready  int
		lag, lagSeconds int64
	}
	var (
		mu      sync.Mutex
		samples []sample
		start   time.Time
	)
	watch, stop := context.WithCancel(context.Background())
	defer stop()
	watcher := exec.CommandContext(watch, kubecluster.Kubectl(), "-n", ns, "get", "streamquery/burst", "--watch", "-o",
		`jsonpath={.status.workers.desired} {.status.workers.ready} {.status.lag} {.status.lagSeconds}{"\n"}`)
	watcher.Env = append(os.Environ(), "KUBECONFIG="+stack.Kubeconfig)
	changes, err := watcher.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	watched := make(chan struct{})
	sampling := func() {
		defer close(watched)
		lines := bufio.NewScanner(changes)
		for lines.Scan() {
			var s sample
			if n, _ := fmt.Sscan(lines.Text(), &s.desired, &s.ready, &s.lag, &s.lagSeconds); n >= 2 {
				s.at = time.Since(start)
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}
	}

	base := time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC).UnixMilli()
	api := brokertest.At(broker)
	pushing := time.Now()
	for b := 0; b < events; b += 1000 {
		items := make([]map[string]any, 0, 1000)
		for i := b; i < b+1000; i++ {
			items = append(items, map[string]any{
				"queue": "e2e.burst", "partition": fmt.Sprintf("p%d", i%partitions),
				"payload": map[string]any{"key": fmt.Sprintf("k%d", i%5), "ts": base + int64(i)*10},
			})
		}
		if r := api.Do(t, "POST", "/api/v1/push", token, map[string]any{"items": items}); r.Status != http.StatusCreated {
			t.Fatalf("push = %d %s", r.Status, r.Body)
		}
	}
	pushed := time.Since(pushing)
	start = time.Now()
	if err := watcher.Start(); err != nil {
		t.Fatal(err)
	}
	go sampling()
	// The watch ends with the test, whichever way it ends.
	unwatch := sync.OnceFunc(func() {
		stop()
		<-watched
		_ = watcher.Wait() // killed by stop
	})
	defer unwatch()
	kubectl(t, "-n", ns, "patch", "streamquery/burst", "--type=merge", "-p", `{"spec":{"suspend":false}}`)
	counted := api.SinkCounts(t, "e2e.burst-counts", "e2e", token, events, 240*time.Second)
	drained := time.Since(start)
	if counted != events {
		t.Fatalf("the sink counted %d events, want exactly %d", counted, events)
	}
	// Back to zero once nothing is pushed for scaleToZeroAfter.
	if _, err := stack.Kubectl("", "-n", ns, "wait", "--for=jsonpath={.status.workers.desired}=0", "streamquery/burst", "--timeout=120s"); err != nil {
		t.Fatalf("the workers did not scale to zero 120 s after the burst was counted: %v; events:\n%s", err,
			kubectl(t, "-n", ns, "get", "events", "--field-selector", "involvedObject.name=burst"))
	}
	zero := time.Since(start)
	unwatch()

	mu.Lock()
	defer mu.Unlock()
	var out time.Duration
	var peak sample
	for _, s := range samples {
		if out == 0 && s.desired > 1 {
			out = s.at
		}
		peak.desired, peak.ready = max(peak.desired, s.desired), max(peak.ready, s.ready)
		peak.lag, peak.lagSeconds = max(peak.lag, s.lag), max(peak.lagSeconds, s.lagSeconds)
	}
	t.Logf("burst of %d events on %d partitions (pushed in %.1f s while suspended); from the resume: scaled out at %.1f s, "+
		"to %d desired (%d ready) at most; peak lag %d messages, %d s; counted exactly once by %.1f s; "+
		"back to zero at %.1f s (%.1f s after the last event was counted)",
		events, partitions, pushed.Seconds(), out.Seconds(), peak.desired, peak.ready, peak.lag, peak.lagSeconds,
		drained.Seconds(), zero.Seconds(), (zero - drained).Seconds())
	if out == 0 || peak.desired < 2 {
		t.Fatalf("the burst never scaled the workers out (peak desired %d); events:\n%s", peak.desired,
			kubectl(t, "-n", ns, "get", "events", "--field-selector", "involvedObject.name=burst"))
	}
	r := api.Do(t, "GET", "/api/v1/pop/queue/e2e.burst-counts?batch=100&wait=true&timeout=3000&autoAck=true&consumerGroup=e2e", token, nil)
	if r.Status != http.StatusNoContent {
		t.Fatalf("after all %d events were counted the sink still answers %d %s", events, r.Status, r.Body)
	}
}

// An upgrade under upgradeMode Savepoint and a rollback to the savepoint,
// done with kubectl as a user does them, keep the sink exact: the old
// pipeline's windows (aggregate "count") hold every event exactly once,
// the ones it folded before the upgrade and the ones it folds again after
// the rollback, and the new pipeline's windows (aggregate "total") are
// each emitted at most once.
func TestAnUpgradeThroughASavepointAndARollbackKeepTheSinkExact(t *testing.T) {
	need(t)
	const ns, half, partitions = "upgrade-e2e", 2000, 4
	query := func(aggregate, size, restore string) string {
		if restore != "" {
			restore = "\n  restoreFrom: " + restore
		}
		return `apiVersion: streams.regent.dev/v1alpha1
kind: StreamQuery
metadata:
  name: upgraded
  namespace: ` + ns + `
spec:
  sourceQueue: e2e.up
  sinkQueue: e2e.up-out
  deletionPolicy: Delete
  upgradeMode: Savepoint` + restore + `
  pipeline:
    keyBy: "payload.key"
    eventTime: "payload.ts"
    window: {type: Tumbling, size: ` + size + `, idleFlush: 3s}
    aggregate: [{name: ` + aggregate + `, fn: count}]
  workers:
    replicas: 2
`
	}
	applyInNamespace(t, ns, query("count", "60s", ""))
	status := func(path string) string {
		return kubectl(t, "-n", ns, "get", "streamquery/upgraded", "-o", "jsonpath="+path)
	}
	failed := func(what string, within time.Duration, err error) {
		t.Helper()
		t.Fatalf("%s: not within %s: %v; the query's events:\n%s", what, within, err,
			kubectl(t, "-n", ns, "get", "events", "--field-selector", "involvedObject.name=upgraded"))
	}
	until := func(what string, within time.Duration, done func() error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), within)
		defer cancel()
		if err := poll.Until(ctx, done); err != nil {
			failed(what, within, err)
		}
	}
	// watchFor waits, through a watch, until the query's status satisfies
	// a kubectl wait condition.
	watchFor := func(what string, within time.Duration, condition string) {
		t.Helper()
		if _, err := stack.Kubectl("", "-n", ns, "wait", "--for="+condition, "streamquery/upgraded", "--timeout="+within.String()); err != nil {
			failed(what, within, err)
		}
	}
	kubectl(t, "-n", ns, "wait", "--for=condition=WorkersReady", "streamquery/upgraded", "--timeout=180s")

	api := brokertest.At(broker)
	base := time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC).UnixMilli()
	push := func(from int) {
		t.Helper()
		items := make([]map[string]any, 0, half)
		for i := from; i < from+half; i++ {
			items = append(items, map[string]any{"queue": "e2e.up", "partition": fmt.Sprintf("p%d", i%partitions),
				"payload": map[string]any{"key": fmt.Sprintf("k%d", i%5), "ts": base + int64(i)*1000}})
		}
		if r := api.Do(t, "POST", "/api/v1/push", token, map[string]any{"items": items}); r.Status != http.StatusCreated {
			t.Fatalf("push = %d %s", r.Status, r.Body)
		}
	}
	// The group's lag as the broker counts it now (the status is a resync
	// old).
	caughtUp := func() error {
		var g map[string]struct {
			Partitions []struct {
				OffsetLag int64 `json:"offsetLag"`
			} `json:"partitions"`
		}
		r := api.Do(t, "GET", "/api/v1/consumer-groups/streams.upgraded", token, nil)
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &g) != nil || len(g["e2e.up"].Partitions) == 0 {
			return fmt.Errorf("the group's partitions: %d %s", r.Status, r.Body)
		}
		for _, p := range g["e2e.up"].Partitions {
			if p.OffsetLag > 0 {
				return fmt.Errorf("a partition's lag is %d", p.OffsetLag)
			}
		}
		return nil
	}
	// A drain waits until the group holds no live lease; one that a
	// stopped worker leaves ends with the queue's leaseTime.
	if r := api.Do(t, "POST", "/api/v1/configure", token, map[string]any{"queue": "e2e.up", "options": map[string]any{"leaseTime": 10}}); r.Status != http.StatusOK {
		t.Fatalf("configure = %d %s", r.Status, r.Body)
	}

	// The old pipeline folds the first half.
	push(0)
	until("the old pipeline consumes the first half", 120*time.Second, caughtUp)
	// The upgrade: drain, savepoint, reset, the new pipeline's workers.
	kubectlApply(t, query("total", "120s", ""))
	watchFor("the upgrade takes its savepoint", 180*time.Second, "jsonpath={.status.savepoints}")
	savepoint := strings.Fields(status("{.status.savepoints[*].name}"))[0]
	kubectl(t, "-n", ns, "wait", "--for=condition=WorkersReady", "streamquery/upgraded", "--timeout=180s")
	push(half)
	until("the new pipeline consumes the second half", 120*time.Second, caughtUp)
	// The rollback: the old pipeline folds the second half again, from
	// the savepoint's state and positions.
	kubectlApply(t, query("total", "120s", savepoint))
	watchFor("the rollback", 180*time.Second, "jsonpath={.status.lastRestore.savepoint}="+savepoint)
	kubectl(t, "-n", ns, "wait", "--for=condition=WorkersReady", "streamquery/upgraded", "--timeout=180s")

	type window struct {
		Key         string          `json:"key"`
		WindowStart json.RawMessage `json:"windowStart"`
		Count       *int64          `json:"count"`
		Total       *int64          `json:"total"`
	}
	seen := map[string]int{}
	var counted, totals int64
	quiet := 0
	for deadline := time.Now().Add(180 * time.Second); quiet < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("the old pipeline's windows hold %d events 180 s after the rollback, want %d", counted, 2*half)
		}
		r := api.Do(t, "GET", "/api/v1/pop/queue/e2e.up-out?batch=100&wait=true&timeout=2000&autoAck=true&consumerGroup=e2e", token, nil)
		if r.Status == http.StatusNoContent {
			if counted >= 2*half {
				quiet++
			}
			continue
		}
		var pop struct {
			Messages []struct {
				Partition string `json:"partition"`
				Data      window `json:"data"`
			} `json:"messages"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &pop) != nil {
			t.Fatalf("pop the sink = %d %s", r.Status, r.Body)
		}
		for _, m := range pop.Messages {
			w := m.Data
			switch {
			case w.Count != nil:
				counted += *w.Count
				seen["count "+m.Partition+"/"+w.Key+"/"+string(w.WindowStart)]++
			case w.Total != nil:
				totals += *w.Total
				seen["total "+m.Partition+"/"+w.Key+"/"+string(w.WindowStart)]++
			default:
				t.Fatalf("a sink message of neither pipeline: %+v", w)
			}
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("window %s emitted %d times", id, n)
		}
	}
	t.Logf("savepoint %s; the old pipeline's windows hold %d events (want %d: the first half folded before the upgrade, "+
		"the second after the rollback), the new pipeline's %d (of the %d it saw; its open windows went with the rollback)",
		savepoint, counted, 2*half, totals, half)
	if counted != 2*half {
		t.Fatalf("the old pipeline's windows hold %d events, want exactly %d", counted, 2*half)
	}
	if totals == 0 || totals > half {
		t.Fatalf("the new pipeline's windows hold %d events, want some and at most %d", totals, half)
	}
}

// helm uninstall removes the release's workloads, and keeps the CRDs (and so
// the StreamQueries) and the data in PostgreSQL.
func TestHelmUninstallKeepsTheCRDsAndTheData(t *testing.T) {
	need(t)
	ctx := context.Background()
	if _, err := chart.Run(stack.Kubeconfig, "uninstall", kubestack.Release, "--namespace", kubestack.Namespace, "--wait", "--timeout", "3m"); err != nil {
		t.Fatal(err)
	}
	for _, crd := range []string{"streamqueries.streams.regent.dev", "tenantquotas.streams.regent.dev"} {
		kubectl(t, "get", "crd", crd)
	}
	if out := kubectl(t, "get", "streamquery", "-A", "-o", "name"); !strings.Contains(out, "orders-per-minute") {
		t.Errorf("the StreamQueries went with the release: %q", out)
	}
	deps, err := stack.Client.AppsV1().Deployments(kubestack.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		t.Errorf("Deployment %s outlived the uninstall", d.Name)
	}
	pool, err := pgxpool.New(ctx, stack.AppDatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	byTenant, err := dbtest.New(pool).StreamQueriesByTenant(ctx, "")
	if err != nil {
		t.Fatalf("the data went with the release: %v", err)
	}
	if len(byTenant) == 0 {
		t.Error("the registrations went with the release")
	}
}
