package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/kubetest"
	"github.com/regent-mq/regent/test/pgtest"
)

// These tests run the operator binary as its own process, as a cluster
// would, against one control plane: they run one at a time, and each
// removes its objects before its operator stops.

var (
	kube       *kubetest.Environment
	kubeconfig string
	binary     string
	k8s        client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "regent-operator-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "operator")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the operator: %v\n%s", err, out)
		return 1
	}
	if kube, err = kubetest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := kube.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop envtest:", err)
		}
	}()
	if kubeconfig, err = kube.Kubeconfig(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
	cfg := rest.CopyConfig(kube.Config)
	cfg.QPS, cfg.Burst = 1000, 2000 // the scale test creates a thousand objects
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return pgtest.Run(m)
}

// process is a running operator binary.
type process struct {
	cmd     *exec.Cmd
	probe   string // http://host:port of /healthz and /readyz
	metrics string
	done    chan error
	log     *strings.Builder
	logMu   sync.Mutex
}

// startBinary runs the operator against b, with tenancy on and signed
// tokens, and waits until it is ready.
func startBinary(t *testing.T, b *brokertest.Broker, extraEnv ...string) *process {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(brokertest.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &process{probe: "http://" + freeAddr(t), metrics: "http://" + freeAddr(t), done: make(chan error, 1), log: &strings.Builder{}}
	p.cmd = exec.Command(binary)
	p.cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + kubeconfig,
		"DATABASE_URL=" + b.DatabaseURL, "REGENT_BROKER_URL=" + b.URL, "REGENT_SIGNING_SECRET_FILE=" + secret,
		"REGENT_TENANCY=on", "REGENT_METRICS_ADDR=" + strings.TrimPrefix(p.metrics, "http://"),
		"REGENT_PROBE_ADDR=" + strings.TrimPrefix(p.probe, "http://"),
	}, extraEnv...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(stderr)
		s.Buffer(make([]byte, 1<<16), 1<<20)
		for s.Scan() {
			p.logMu.Lock()
			p.log.WriteString(s.Text() + "\n")
			p.logMu.Unlock()
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("operator log:\n%s", p.logs())
		}
	})
	brokertest.Eventually(t, 30*time.Second, func() error {
		if code := get(p.probe + "/readyz"); code != http.StatusOK {
			return fmt.Errorf("the operator is not ready (%d):\n%s", code, p.logs())
		}
		return nil
	})
	return p
}

func (p *process) logs() string {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return p.log.String()
}

// stop sends SIGTERM and returns the exit error, once.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("the operator exited with %v on SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Error("the operator ignored SIGTERM for 30s")
	}
}

// peakRSS is the process's high-water resident set, from /proc.
func (p *process) peakRSS(t *testing.T) (peak, now int64) {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			peak = kb << 10
		case "VmRSS:":
			now = kb << 10
		}
	}
	return peak, now
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func body(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func isReady(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, v1.ConditionReady)
}

// The README's tour: the samples, applied with kubectl, all become Ready
// under the operator binary, which serves its probes and metrics.
func TestTheSamplesBecomeReadyUnderTheOperatorBinary(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithJWT(true))
	p := startBinary(t, b)
	if code := get(p.probe + "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz answered %d", code)
	}

	samples := filepath.Join(kubetest.RepoRoot(), "config", "samples")
	kubectl := exec.Command(filepath.Join(kubetest.AssetsDir(), "kubectl"), "--kubeconfig", kubeconfig, "apply", "-f", samples)
	if out, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -f config/samples/: %v\n%s", err, out)
	}
	ctx := context.Background()
	objs := []client.Object{
		&v1.StreamQuery{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-streams", Name: "orders-per-minute"}},
		&v1.StreamQuery{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "clicks-per-page"}},
		&v1.StreamQuery{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders-revenue"}},
		&v1.StreamQuery{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sales-per-region"}},
		&v1.TenantQuota{ObjectMeta: metav1.ObjectMeta{Name: "acme"}},
	}
	t.Cleanup(func() { removeAll(t, objs) }) // before the operator stops: cleanups run last-in first-out
	for _, o := range objs {
		waitFor(t, o, func() bool {
			switch o := o.(type) {
			case *v1.StreamQuery:
				return isReady(o.Status.Conditions)
			case *v1.TenantQuota:
				return isReady(o.Status.Conditions)
			}
			return false
		})
	}
	for name, tenant := range map[string]string{"orders.per_minute": "acme", "clicks-per-page": "default"} {
		if n, err := b.DB.StreamQueriesByTenant(ctx, name); err != nil || len(n) != 1 || n[tenant] != 1 {
			t.Fatalf("%s registered under %v (%v), want %s", name, n, err, tenant)
		}
	}

	metrics := body(t, p.metrics+"/metrics")
	for _, want := range []string{`regent_operator_registrations_total{result="registered"}`, `regent_tenantquota_max_queries{tenant="acme"} 10`, `regent_tenantquota_registered_queries{tenant="acme"}`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}

func TestTheBinaryRefusesAShortSigningSecret(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "--database-url=postgres://127.0.0.1:1/x", "--signing-secret-file="+secret)
	cmd.Env = []string{"KUBECONFIG=" + kubeconfig}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "need at least 32") {
		t.Fatalf("exit %v with %s; want a refusal naming the secret's length", err, out)
	}
}

// removeAll deletes objs and waits until they are gone, so that the next
// test's operator never sees them.
func removeAll(t *testing.T, objs []client.Object) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		if err := k8s.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete %s: %v", o.GetName(), err)
		}
	}
	brokertest.Eventually(t, 60*time.Second, func() error {
		for _, o := range objs {
			if k8s.Get(ctx, client.ObjectKeyFromObject(o), o) == nil {
				return fmt.Errorf("%s is not removed (finalizers %v)", o.GetName(), o.GetFinalizers())
			}
		}
		return nil
	})
}

var scaleRuns atomic.Int32

// The scale target: a thousand StreamQueries over ten namespaces and ten
// tenants, each with a TenantQuota, all Ready. The test logs the time from
// the first create to the last Ready, and the operator's peak memory.
func TestAThousandQueriesOverTenNamespacesAndTenTenantsBecomeReady(t *testing.T) {
	const tenants, perTenant = 10, 100
	b := brokertest.Start(t, brokertest.WithJWT(true), func(c *config.Config) { c.PoolSize = 20 })
	p := startBinary(t, b)
	ctx := context.Background()
	label := map[string]string{"regent-scale": "1"}

	var objs []client.Object
	t.Cleanup(func() { removeAll(t, objs) })
	var mu sync.Mutex
	var createErr error
	created := func(o client.Object, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && createErr == nil {
			createErr = err
		}
		objs = append(objs, o)
	}

	// Namespaces stay Terminating without a namespace controller: a second
	// run in the same process (go test -count) needs names of its own.
	run := scaleRuns.Add(1)
	start := time.Now()
	for i := range tenants {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%d-%d", run, i),
			Labels: map[string]string{v1.TenantLabel: fmt.Sprintf("scale-tenant-%d", i)}}}
		if err := k8s.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		tq := &v1.TenantQuota{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-tenant-%d", i)},
			Spec: v1.TenantQuotaSpec{Tenant: fmt.Sprintf("scale-tenant-%d", i), MaxQueries: ptr.To[int32](perTenant)}}
		created(tq, k8s.Create(ctx, tq))
	}
	work := make(chan *v1.StreamQuery)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for q := range work {
				created(q, k8s.Create(ctx, q))
			}
		})
	}
	for i := range tenants * perTenant {
		work <- &v1.StreamQuery{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("scale-%d-%d", run, i%tenants), Name: fmt.Sprintf("q-%d", i), Labels: label},
			Spec:       v1.StreamQuerySpec{SourceQueue: fmt.Sprintf("source-%d", i%7), ConfigHash: "h1"},
		}
	}
	close(work)
	wg.Wait()
	if createErr != nil {
		t.Fatal(createErr)
	}
	allCreated := time.Since(start)

	brokertest.Eventually(t, 3*time.Minute, func() error {
		var list v1.StreamQueryList
		if err := k8s.List(ctx, &list, client.MatchingLabels(label)); err != nil {
			return err
		}
		n := 0
		for i := range list.Items {
			if isReady(list.Items[i].Status.Conditions) {
				n++
			}
		}
		if n != tenants*perTenant {
			return fmt.Errorf("%d of %d StreamQueries Ready after %s", n, tenants*perTenant, time.Since(start))
		}
		return nil
	})
	allReady := time.Since(start)
	peak, now := p.peakRSS(t)
	t.Logf("scale: %d StreamQueries over %d namespaces and tenants: created in %s, all Ready %s after the first create; operator RSS peak %.0f MiB, now %.0f MiB",
		tenants*perTenant, tenants, allCreated.Round(time.Millisecond), allReady.Round(time.Millisecond), float64(peak)/(1<<20), float64(now)/(1<<20))

	for _, line := range strings.Split(body(t, p.metrics+"/metrics"), "\n") {
		if strings.HasPrefix(line, "regent_operator_registrations_total{") {
			t.Logf("scale: %s", line)
		}
	}

	registered, err := b.DB.StreamQueriesByTenant(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for tenant, n := range registered {
		if n != perTenant {
			t.Errorf("tenant %s has %d registrations, want %d", tenant, n, perTenant)
		}
		seen++
	}
	if seen != tenants {
		t.Fatalf("%d tenants registered queries, want %d", seen, tenants)
	}
}

// Two operators with --leader-elect: one holds the lease and reconciles;
// when it stops, the other takes over.
func TestLeaderElectionHandsOverWhenTheLeaderStops(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithJWT(true))
	ctx := context.Background()
	first := startBinary(t, b, "REGENT_LEADER_ELECT=true", "POD_NAMESPACE=default")
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "regent-operator.streams.regent.dev"}}
	holder := func() string {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	brokertest.Eventually(t, 30*time.Second, func() error {
		if holder() == "" {
			return errors.New("the first operator has not taken the lease")
		}
		return nil
	})
	leader := holder()
	startBinary(t, b, "REGENT_LEADER_ELECT=true", "POD_NAMESPACE=default")

	q := &v1.StreamQuery{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "elected"},
		Spec: v1.StreamQuerySpec{SourceQueue: "orders", ConfigHash: "h1", OnConfigChange: v1.OnConfigChangeReset}}
	if err := k8s.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeAll(t, []client.Object{q}) })
	waitFor(t, q, func() bool { return isReady(q.Status.Conditions) && q.Status.RegisteredHash == "h1" })
	if h := holder(); h != leader {
		t.Fatalf("lease moved from %s to %s while the leader ran", leader, h)
	}

	first.stop(t)
	brokertest.Eventually(t, 60*time.Second, func() error {
		if h := holder(); h == leader || h == "" {
			return fmt.Errorf("the lease is not handed over (holder %q)", h)
		}
		return nil
	})
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
		t.Fatal(err)
	}
	q.Spec.ConfigHash = "h2"
	if err := k8s.Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	waitFor(t, q, func() bool { return isReady(q.Status.Conditions) && q.Status.RegisteredHash == "h2" })
}

// waitFor polls obj until cond holds.
func waitFor(t *testing.T, obj client.Object, cond func() bool) {
	t.Helper()
	brokertest.Eventually(t, 30*time.Second, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		if !cond() {
			return fmt.Errorf("%s has not reached the expected state: %+v", obj.GetName(), obj)
		}
		return nil
	})
}
