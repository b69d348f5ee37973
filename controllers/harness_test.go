package controllers_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/controllers"
	"github.com/regent-mq/regent/controllers/registration"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/kubetest"
	"github.com/regent-mq/regent/test/pgtest"
)

// One control plane serves every test of the package. Each test labels its
// objects with its own id and runs operators whose cache sees only that
// label, so tests run in parallel without seeing each other's objects.
var (
	kube      *kubetest.Environment
	kubeErr   error
	kubeReady = make(chan struct{}) // closed once kube and kubeErr are set
	scheme    = runtime.NewScheme()
	seq       atomic.Int64
)

const testLabel = "regent-test"

func TestMain(m *testing.M) {
	// Without a logger, controller-runtime prints a warning with a goroutine
	// stack 30 s in, which reads like a crash in a failing test's output.
	log := logr.Discard()
	if os.Getenv("REGENT_TEST_LOG") != "" {
		log = logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil))
	}
	ctrl.SetLogger(log)
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	// The tests wait on the control plane and the reconcilers far more than
	// they compute: at go test's default of one test per CPU the binary
	// keeps a sixth of a core busy. Run more at once, unless -parallel says.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(parallel)); err != nil {
			panic(err)
		}
	}
	// The control plane takes seconds to start: the tests start meanwhile,
	// the shared broker and its database too, and wait for it in
	// newHarness.
	go func() {
		kube, kubeErr = kubetest.Start()
		close(kubeReady)
	}()
	// One broker, with JWT auth and tenancy on, serves every test: each
	// test acts as tenants of its own (harness.tenant).
	code := brokertest.Run(m, brokertest.WithJWT(true))
	<-kubeReady
	if kubeErr != nil {
		fmt.Fprintln(os.Stderr, kubeErr)
		code = 1
	} else if err := kube.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(pgtest.NoLeaks(code))
}

// parallel is how many tests run at once unless -parallel says otherwise.
const parallel = 8

// workerImage is the operator's --worker-image in these tests.
const workerImage = "registry.test/regent-worker:1"

// wait is how long any expected state may take to appear.
const wait = 30 * time.Second

// harness is one test's world: a broker with JWT auth and tenancy on (the
// package's, on which the test's tenants are its own), its database, a
// client of the control plane, and the objects the test made.
type harness struct {
	t      *testing.T
	id     string
	n      int64 // the test's number, which suffixes its tenants
	broker *brokertest.Broker
	k8s    client.Client
	ctx    context.Context
}

// newHarness gives the test the package's shared broker, or with opts a
// broker of its own on a fresh database: for a configuration other than
// the shared one's (tenancy off), whose default tenant every such test
// would otherwise share.
func newHarness(t *testing.T, opts ...brokertest.Option) *harness {
	t.Helper()
	t.Parallel()
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	if len(name) > 40 {
		name = name[:40]
	}
	n := seq.Add(1)
	h := &harness{t: t, id: fmt.Sprintf("%s-%d", strings.Trim(name, "-"), n), n: n, ctx: context.Background()}
	if len(opts) == 0 {
		h.broker = brokertest.Shared(t)
	} else {
		h.broker = brokertest.Start(t, append([]brokertest.Option{brokertest.WithJWT(true)}, opts...)...)
	}
	<-kubeReady
	if kubeErr != nil {
		t.Fatalf("envtest: %v", kubeErr)
	}
	var err error
	h.k8s, err = client.New(kube.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// operator is a running manager with both reconcilers.
type operator struct {
	stop func()
}

type operatorOpts struct {
	brokerURL string        // default: the harness's broker
	resync    time.Duration // default: a minute, longer than any test waits
	tenancy   *bool         // default: on
	noSecret  bool          // send no tokens (broker with auth off)
	// noWorkerImage runs the operator without --worker-image.
	noWorkerImage bool
	// db, when set, stands between the operator and the real cell
	// database, to stop a call part-way.
	db func(controllers.CellDB) controllers.CellDB
}

// startOperator runs an operator until the test ends or stop is called.
func (h *harness) startOperator(o operatorOpts) *operator {
	h.t.Helper()
	if o.brokerURL == "" {
		o.brokerURL = h.broker.URL
	}
	if o.resync == 0 {
		o.resync = time.Minute
	}
	tenancy := o.tenancy == nil || *o.tenancy
	secret := []byte(brokertest.Secret)
	if o.noSecret {
		secret = nil
	}
	image := workerImage
	if o.noWorkerImage {
		image = ""
	}
	mgr, err := ctrl.NewManager(kube.Config, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{DefaultLabelSelector: labels.SelectorFromSet(labels.Set{testLabel: h.id})},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Several operators run in this process, one or more per test.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	pool, err := pgxpool.New(h.ctx, h.broker.DatabaseURL)
	if err != nil {
		h.t.Fatal(err)
	}
	var db controllers.CellDB = celldb.New(pool)
	if o.db != nil {
		db = o.db(db)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	if err := controllers.Setup(ctx, mgr, controllers.Config{
		Broker:         registration.New(o.brokerURL, secret, nil),
		DB:             db,
		Tenancy:        tenancy,
		ResyncInterval: o.resync,
		// A drain's leases end when a test expires them: look again soon.
		DrainPoll:       100 * time.Millisecond,
		Workers:         4,
		SigningSecret:   secret,
		WorkerImage:     image,
		WorkerBrokerURL: o.brokerURL,
	}); err != nil {
		cancel()
		h.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	op := &operator{stop: func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("operator: %v", err)
			}
			pool.Close()
		})
	}}
	h.t.Cleanup(op.stop)
	return op
}

// registered is where most tests start: a broker that grants tenant acme,
// a proxy in front of it, an operator behind the proxy, and StreamQuery
// "clicks" (after edit) in an acme namespace, registered.
func registered(t *testing.T, o operatorOpts, edit ...func(*v1.StreamQuery)) (*harness, *proxy, *operator, *v1.StreamQuery) {
	t.Helper()
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	p := h.proxy()
	o.brokerURL = p.URL
	op := h.startOperator(o)
	return h, p, op, h.reason(h.query(h.namespace(h.tenant("acme")), "clicks", edit...), v1.ReasonRegistered)
}

// tenant is the test's tenant called name: tests share one broker, so each
// acts as tenants of its own (h.tenant("acme") is acme_12 in test 12). Not
// brokertest's Q ("t12-acme"): a tenant names its table sink's schema,
// regent_<tenant>, which a hyphen would make a quoted identifier in every
// message the sink tests expect. The default tenant is everyone's, and a
// test that uses it says why.
func (h *harness) tenant(name string) string {
	return fmt.Sprintf("%s_%d", name, h.n)
}

// namespace creates a namespace, labelled with the tenant when it is not
// empty, and returns its name.
func (h *harness) namespace(tenant string) string {
	h.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", h.id, seq.Add(1)), Labels: map[string]string{testLabel: h.id}}}
	if tenant != "" {
		ns.Labels[v1.TenantLabel] = tenant
	}
	h.create(ns)
	return ns.Name
}

// query creates a StreamQuery on source queue "orders" with hash "h1",
// after edit has adjusted it.
func (h *harness) query(ns, name string, edit ...func(*v1.StreamQuery)) *v1.StreamQuery {
	h.t.Helper()
	q := &v1.StreamQuery{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{testLabel: h.id}},
		Spec:       v1.StreamQuerySpec{SourceQueue: "orders", SinkQueue: "orders.out", ConfigHash: "h1"},
	}
	for _, e := range edit {
		e(q)
	}
	h.create(q)
	return q
}

// quota creates a TenantQuota with the cap max (nil: none).
func (h *harness) quota(tenant string, max *int32, edit ...func(*v1.TenantQuota)) *v1.TenantQuota {
	h.t.Helper()
	tq := &v1.TenantQuota{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", h.id, seq.Add(1)), Labels: map[string]string{testLabel: h.id}},
		Spec:       v1.TenantQuotaSpec{Tenant: tenant, MaxQueries: max},
	}
	for _, e := range edit {
		e(tq)
	}
	h.create(tq)
	return tq
}

// grant writes an enabled quota row for tenant straight into the database,
// for tests that are not about quotas.
func (h *harness) grant(tenant string) {
	h.t.Helper()
	h.broker.Grant(h.t, tenant, nil)
}

func (h *harness) create(obj client.Object) {
	h.t.Helper()
	if err := h.k8s.Create(h.ctx, obj); err != nil {
		h.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func (h *harness) delete(obj client.Object) {
	h.t.Helper()
	if err := h.k8s.Delete(h.ctx, obj); err != nil {
		h.t.Fatalf("delete %T %s: %v", obj, obj.GetName(), err)
	}
}

// edit reads obj afresh, applies change and updates it, retrying on
// conflicts with the operator's own writes.
func edit[T client.Object](h *harness, obj T, change func(T)) {
	h.t.Helper()
	for {
		if err := h.k8s.Get(h.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			h.t.Fatal(err)
		}
		change(obj)
		err := h.k8s.Update(h.ctx, obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			h.t.Fatalf("update %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

// eventually polls until cond holds for a fresh copy of obj, and fails the
// test with what it last saw otherwise.
func eventually[T client.Object](h *harness, obj T, what string, cond func(T) bool) T {
	h.t.Helper()
	brokertest.Eventually(h.t, wait, func() error {
		err := h.k8s.Get(h.ctx, client.ObjectKeyFromObject(obj), obj)
		if err == nil && cond(obj) {
			return nil
		}
		return fmt.Errorf("%T %s is not %s (error %v): %+v", obj, obj.GetName(), what, err, obj)
	})
	return obj
}

// gone waits until obj no longer exists.
func (h *harness) gone(obj client.Object) {
	h.t.Helper()
	brokertest.Eventually(h.t, wait, func() error {
		if err := h.k8s.Get(h.ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%T %s is not removed (finalizers %v, error %v)", obj, obj.GetName(), obj.GetFinalizers(), err)
		}
		return nil
	})
}

// ready reports the reason of the Ready condition and whether it is true.
func ready(conds []metav1.Condition) (bool, string) {
	c := meta.FindStatusCondition(conds, v1.ConditionReady)
	if c == nil {
		return false, ""
	}
	return c.Status == metav1.ConditionTrue, c.Reason
}

func message(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, v1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// reason waits for the StreamQuery's Ready condition to have reason (and,
// for Registered, to be true for its current generation).
func (h *harness) reason(q *v1.StreamQuery, reason string) *v1.StreamQuery {
	h.t.Helper()
	return eventually(h, q, reason, func(q *v1.StreamQuery) bool {
		ok, r := ready(q.Status.Conditions)
		return r == reason && ok == (reason == v1.ReasonRegistered) && q.Status.ObservedGeneration == q.Generation
	})
}

func (h *harness) quotaReason(tq *v1.TenantQuota, reason string) *v1.TenantQuota {
	h.t.Helper()
	return eventually(h, tq, reason, func(tq *v1.TenantQuota) bool {
		_, r := ready(tq.Status.Conditions)
		return r == reason && tq.Status.ObservedGeneration == tq.Generation
	})
}

// wantEvent waits for an Event about obj with reason whose note contains
// text.
func (h *harness) wantEvent(obj client.Object, reason, text string) {
	h.t.Helper()
	brokertest.Eventually(h.t, wait, func() error {
		var list eventsv1.EventList
		if err := h.k8s.List(h.ctx, &list, client.InNamespace(eventNamespace(obj))); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.UID != obj.GetUID() {
				continue
			}
			if e.Reason == reason && strings.Contains(e.Note, text) {
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return fmt.Errorf("no %s event mentioning %q for %s; saw %q", reason, text, obj.GetName(), seen)
	})
}

// noEvent fails if obj has an Event with reason.
func (h *harness) noEvent(obj client.Object, reason string) {
	h.t.Helper()
	var list eventsv1.EventList
	if err := h.k8s.List(h.ctx, &list, client.InNamespace(eventNamespace(obj))); err != nil {
		h.t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.UID == obj.GetUID() && e.Reason == reason {
			h.t.Fatalf("unexpected %s event for %s: %s", reason, obj.GetName(), e.Note)
		}
	}
}

// Events about cluster-scoped objects land in the default namespace.
func eventNamespace(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return metav1.NamespaceDefault
	}
	return obj.GetNamespace()
}

// cursors are group's cursors on acme's queue orders, the source of the
// tests' queries.
func (h *harness) cursors(group string) []dbtest.Cursor {
	h.t.Helper()
	all, err := h.broker.DB.Cursors(h.ctx, h.tenant("acme"), "orders")
	if err != nil {
		h.t.Fatal(err)
	}
	var out []dbtest.Cursor
	for _, c := range all {
		if c.Group == group {
			out = append(out, c)
		}
	}
	return out
}

// cursor is group's one cursor on acme's queue orders.
func (h *harness) cursor(group string) dbtest.Cursor {
	h.t.Helper()
	c := h.cursors(group)
	if len(c) != 1 {
		h.t.Fatalf("group %s has %d cursors on orders, want 1: %+v", group, len(c), c)
	}
	return c[0]
}

// registration is the query row of tenant and name, and whether it exists.
type registrationRow struct {
	ID, Source, Sink, Hash string
}

func (h *harness) registration(tenant, name string) (registrationRow, bool) {
	h.t.Helper()
	id, q, err := h.broker.DB.StreamQueryNamed(h.ctx, tenant, name)
	if err != nil {
		h.t.Fatal(err)
	}
	return registrationRow{ID: id, Source: q.Source, Sink: ptr.Deref(q.Sink, ""), Hash: q.ConfigHash}, q.Exists
}

// writeState stands in for a worker's cycle: it writes state rows for the
// query under a partition, as the cycle's upserts do.
func (h *harness) writeState(queryID string, keys ...string) {
	h.t.Helper()
	for _, k := range keys {
		h.broker.PutState(h.t, queryID, "0193f0c5-0000-7000-8000-000000000001", k, `{"acc": 1}`)
	}
}

// stateKeys lists the query's state keys.
func (h *harness) stateKeys(queryID string) []string {
	h.t.Helper()
	keys := slices.Sorted(maps.Keys(h.broker.State(h.t, queryID, "")))
	return keys
}

// token mints a read-write token of tenant, as a worker would hold.
func (h *harness) token(tenant string) string {
	return brokertest.Mint(h.t, tenant, auth.ReadWrite)
}

// proxy stands between the operator and the broker and counts the
// registrations that reset. onReset, when set, handles a reset request
// instead of forwarding it.
type proxy struct {
	URL      string
	target   *url.URL
	requests atomic.Int32 // requests that reached the proxy
	resets   atomic.Int32 // reset requests forwarded to the broker
	mu       sync.Mutex
	onReset  func(w http.ResponseWriter, r *http.Request, body []byte)
}

func (h *harness) proxy() *proxy {
	h.t.Helper()
	p := &proxy{}
	var err error
	if p.target, err = url.Parse(h.broker.URL); err != nil {
		h.t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	srv := &http.Server{Handler: p}
	go func() { _ = srv.Serve(l) }()
	h.t.Cleanup(func() { _ = srv.Close() })
	p.URL = "http://" + l.Addr().String()
	return p
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.requests.Add(1)
	reset := strings.Contains(string(body), `"reset":true`)
	p.mu.Lock()
	hook := p.onReset
	p.mu.Unlock()
	if reset && hook != nil {
		hook(w, r, body)
		return
	}
	if reset {
		p.resets.Add(1)
	}
	p.forward(w, r, body)
}

// forward sends the request on to the broker and copies the answer back.
func (p *proxy) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	r.ContentLength = int64(len(body))
	httputil.NewSingleHostReverseProxy(p.target).ServeHTTP(w, r)
}

func (p *proxy) setOnReset(f func(w http.ResponseWriter, r *http.Request, body []byte)) {
	p.mu.Lock()
	p.onReset = f
	p.mu.Unlock()
}
