package controllers

// Fakes of the broker, the cell database and the API server, for unit tests
// of the reconcilers' rules, in particular the crash points of the reset
// protocol that a real stack cannot stop at. The envtest suite
// (harness_test.go) runs the same reconcilers against a real broker,
// PostgreSQL and kube-apiserver.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/controllers/registration"
)

// fakeQuery is a registration in the fake cell.
type fakeQuery struct {
	id         string
	hash       string
	generation int64
	stateRows  int64
}

// fakeCell is a broker and its database in one, a Registrar and a CellDB:
// a new name is registered, another hash is a conflict unless the
// registration resets, and a reset discards the state and raises the
// generation, all at once, as queen_streams.register does.
type fakeCell struct {
	mu      sync.Mutex
	queries map[string]*fakeQuery // by tenant/name
	quotas  map[string]celldb.Quota
	ids     int
	sent    int // reset registrations received
	resets  int // reset registrations that took effect
	dbErr   error
	// intercept, when set, answers each registration in place of the
	// broker; commit applies the broker's rules and returns their answer.
	intercept func(req registration.Request, commit func() registration.Result) registration.Result
}

func newFakeCell() *fakeCell {
	return &fakeCell{queries: map[string]*fakeQuery{}, quotas: map[string]celldb.Quota{}}
}

func (c *fakeCell) Register(_ context.Context, tenant string, req registration.Request) registration.Result {
	c.mu.Lock()
	if req.Reset {
		c.sent++
	}
	hook := c.intercept
	c.mu.Unlock()
	commit := func() registration.Result {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.apply(tenant, req)
	}
	if hook != nil {
		return hook(req, commit)
	}
	return commit()
}

func (c *fakeCell) apply(tenant string, req registration.Request) registration.Result {
	q, ok := c.queries[tenant+"/"+req.Name]
	if !ok {
		c.ids++
		q = &fakeQuery{id: fmt.Sprintf("query-%d", c.ids), hash: req.ConfigHash}
		c.queries[tenant+"/"+req.Name] = q
		return registration.Result{Outcome: registration.Registered, QueryID: q.id, Fresh: true}
	}
	if q.hash != req.ConfigHash && !req.Reset {
		return registration.Result{Outcome: registration.Conflict, Message: fmt.Sprintf("query %q is registered with a different config_hash", req.Name)}
	}
	if req.Reset {
		q.stateRows, q.generation = 0, q.generation+1
		c.resets++
	}
	q.hash = req.ConfigHash
	return registration.Result{Outcome: registration.Registered, QueryID: q.id, Reset: req.Reset}
}

// query returns the registration of tenant and name, nil when there is none.
func (c *fakeCell) query(tenant, name string) *fakeQuery {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.queries[tenant+"/"+name]; q != nil {
		cp := *q
		return &cp
	}
	return nil
}

// writeState stands in for a worker's cycle.
func (c *fakeCell) writeState(tenant, name string, rows int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries[tenant+"/"+name].stateRows += rows
}

// counts returns the reset registrations received and those that took
// effect.
func (c *fakeCell) counts() (sent, resets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent, c.resets
}

func (c *fakeCell) setIntercept(f func(req registration.Request, commit func() registration.Result) registration.Result) {
	c.mu.Lock()
	c.intercept = f
	c.mu.Unlock()
}

func (c *fakeCell) ApplyQuota(_ context.Context, q celldb.Quota) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dbErr != nil {
		return 0, c.dbErr
	}
	c.quotas[q.Tenant] = q
	return c.count(q.Tenant), nil
}

func (c *fakeCell) CountQueries(_ context.Context, tenant string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count(tenant), c.dbErr
}

func (c *fakeCell) Usage(_ context.Context, tenant string, _ time.Duration) (celldb.Usage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return celldb.Usage{Queries: c.count(tenant)}, c.dbErr
}

func (c *fakeCell) count(tenant string) int64 {
	var n int64
	for k := range c.queries {
		if strings.HasPrefix(k, tenant+"/") {
			n++
		}
	}
	return n
}

func (c *fakeCell) DeleteQuota(_ context.Context, tenant string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.quotas, tenant)
	return c.dbErr
}

func (c *fakeCell) DeleteQuery(_ context.Context, tenant, name string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, found := c.queries[tenant+"/"+name]
	delete(c.queries, tenant+"/"+name)
	return found, c.dbErr
}

func (c *fakeCell) Progress(_ context.Context, tenant, name, _, _ string) (celldb.Progress, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queries[tenant+"/"+name]
	if q == nil {
		return celldb.Progress{}, celldb.ErrNoQuery
	}
	return celldb.Progress{StateRows: q.stateRows}, c.dbErr
}

func (c *fakeCell) ResetGeneration(_ context.Context, tenant, name string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queries[tenant+"/"+name]
	if q == nil {
		return 0, celldb.ErrNoQuery
	}
	return q.generation, c.dbErr
}

func (c *fakeCell) Suspend(_ context.Context, tenant, name, _ string, _ bool) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queries[tenant+"/"+name] != nil, c.dbErr
}

// Rewind is not part of the fake's rules: the rewind's fence is in its
// SQL, tested on PostgreSQL (broker/pg/db) and through the envtest suite.
func (c *fakeCell) Rewind(context.Context, string, string, string, string, time.Time) (celldb.Rewound, error) {
	return celldb.Rewound{}, errors.New("the fake cell does not rewind")
}

func (c *fakeCell) SourceLoad(context.Context, string, string, string, string, celldb.WindowKeys) (celldb.SourceLoad, error) {
	return celldb.SourceLoad{}, c.dbErr
}

// Savepoints are not part of the fake's rules either: they are tested on
// PostgreSQL (broker/pg/db) and through the envtest suite. The fake has none,
// and no leases.
func (c *fakeCell) TakeSavepoint(context.Context, string, string, string, string, *string) (celldb.Savepoint, bool, error) {
	return celldb.Savepoint{}, false, errors.New("the fake cell takes no savepoints")
}

func (c *fakeCell) Savepoints(context.Context, string, string) ([]celldb.Savepoint, error) {
	return nil, nil
}

func (c *fakeCell) PruneSavepoints(context.Context, string, string, int32) (int32, error) {
	return 0, nil
}

func (c *fakeCell) RestoreSavepoint(context.Context, string, string, string, string, string) (celldb.Restored, error) {
	return celldb.Restored{}, errors.New("the fake cell restores nothing")
}

func (c *fakeCell) Leases(context.Context, string, string, string) (int32, error) { return 0, nil }

// The fake cell holds no tables: its tests declare no table sink.
func (c *fakeCell) SinkColumns(context.Context, string, string, string) ([]celldb.SinkColumn, error) {
	return nil, errNoTables
}

func (c *fakeCell) CreateSinkTable(context.Context, string, string, []celldb.SinkColumn, []string) (bool, error) {
	return false, errNoTables
}

func (c *fakeCell) CheckSinkTable(context.Context, string, string, string, []string, string) error {
	return errNoTables
}

var errNoTables = errors.New("the fake cell holds no tables")

var errDied = errors.New("the operator died: nothing it sends lands any more")

// world is an API server (the fake client), a cell, and operators that
// come and go: a StreamQuery "clicks" in namespace "ns", on the default
// tenant (tenancy off).
type world struct {
	t      *testing.T
	cell   *fakeCell
	api    client.WithWatch // the API server, read past any cache
	events *events.FakeRecorder
	// dead, once set, makes the running operator's writes fail: it died
	// at that point, and whatever it did afterwards never happened.
	dead atomic.Bool
	// dieOnIntent kills the operator as it writes a status that records a
	// pending reset, before the write lands.
	dieOnIntent atomic.Bool
	// stale, when set, is the copy of the StreamQuery the operator's cache
	// serves.
	mu    sync.Mutex
	stale *v1.StreamQuery
}

var unitScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

var clicks = client.ObjectKey{Namespace: "ns", Name: "clicks"}

func newWorld(t *testing.T, edit ...func(*v1.StreamQuery)) *world {
	t.Helper()
	q := &v1.StreamQuery{
		ObjectMeta: metav1.ObjectMeta{Namespace: clicks.Namespace, Name: clicks.Name, Generation: 1},
		Spec: v1.StreamQuerySpec{SourceQueue: "orders", ConfigHash: "h1",
			OnConfigChange: v1.OnConfigChangeBlock, DeletionPolicy: v1.DeletionPolicyRetain},
	}
	for _, e := range edit {
		e(q)
	}
	b := fake.NewClientBuilder().WithScheme(unitScheme).WithObjects(q).WithStatusSubresource(&v1.StreamQuery{}, &v1.TenantQuota{})
	for _, ix := range indexes {
		b = b.WithIndex(ix.obj, ix.field, ix.fn)
	}
	return &world{t: t, cell: newFakeCell(), api: b.Build(), events: events.NewFakeRecorder(100)}
}

// operator starts a fresh operator process.
func (w *world) operator() *StreamQueryReconciler {
	w.dead.Store(false)
	c := interceptor.NewClient(w.api, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			w.mu.Lock()
			stale := w.stale
			w.mu.Unlock()
			if q, ok := obj.(*v1.StreamQuery); ok && stale != nil && key == clicks {
				stale.DeepCopyInto(q)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if w.dead.Load() {
				return errDied
			}
			return c.Update(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if q, ok := obj.(*v1.StreamQuery); ok && q.Status.PendingReset != nil && w.dieOnIntent.Load() {
				w.dead.Store(true)
			}
			if w.dead.Load() {
				return errDied
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	return &StreamQueryReconciler{Client: c, APIReader: w.api, Recorder: w.events,
		Config: Config{Broker: w.cell, DB: w.cell, ResyncInterval: time.Hour, Workers: 1}}
}

// reconcile runs one reconcile of "clicks" by op.
func (w *world) reconcile(op *StreamQueryReconciler) (ctrl.Result, error) {
	return op.Reconcile(context.Background(), ctrl.Request{NamespacedName: clicks})
}

// settle reconciles with op until it asks for nothing sooner than a
// resync, and fails the test if it errs or keeps asking.
func (w *world) settle(op *StreamQueryReconciler) {
	w.t.Helper()
	for range 10 {
		res, err := w.reconcile(op)
		if err != nil {
			w.t.Fatalf("reconcile: %v", err)
		}
		if res != retrySoon {
			return
		}
	}
	w.t.Fatal("the operator still asked to retry soon after 10 reconciles")
}

// query reads the StreamQuery from the API server.
func (w *world) query() *v1.StreamQuery {
	w.t.Helper()
	var q v1.StreamQuery
	if err := w.api.Get(context.Background(), clicks, &q); err != nil {
		w.t.Fatal(err)
	}
	return &q
}

func (w *world) edit(change func(*v1.StreamQuery)) {
	w.t.Helper()
	q := w.query()
	change(q)
	if err := w.api.Update(context.Background(), q); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) serveStale(q *v1.StreamQuery) {
	w.mu.Lock()
	w.stale = q
	w.mu.Unlock()
}

// drainEvents returns the Events recorded so far.
func (w *world) drainEvents() []string {
	var seen []string
	for {
		select {
		case e := <-w.events.Events:
			seen = append(seen, e)
		default:
			return seen
		}
	}
}
