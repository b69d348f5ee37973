// Package controllers holds the operator's two reconcilers: StreamQuery,
// which registers queries on the broker, and TenantQuota, which writes
// tenant grants to the cell database.
package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/controllers/registration"
)

// Registrar registers queries on the broker; registration.Client is the
// real one.
type Registrar interface {
	Register(ctx context.Context, tenant string, req registration.Request) registration.Result
}

// CellDB is the cell database; celldb.DB is the real one. The reconcilers
// depend on these two interfaces rather than on the clients, so that their
// rules can be tested against fakes as well as against a real broker.
type CellDB interface {
	ApplyQuota(ctx context.Context, q celldb.Quota) (registered int64, err error)
	CountQueries(ctx context.Context, tenant string) (int64, error)
	// Usage reads the tenant's usage and the limits that refused it
	// within the last within.
	Usage(ctx context.Context, tenant string, within time.Duration) (celldb.Usage, error)
	DeleteQuota(ctx context.Context, tenant string) error
	DeleteQuery(ctx context.Context, tenant, name string) (found bool, err error)
	// Progress and ResetGeneration return celldb.ErrNoQuery when the
	// tenant has no query of that name.
	Progress(ctx context.Context, tenant, name, group, source string) (celldb.Progress, error)
	ResetGeneration(ctx context.Context, tenant, name string) (int64, error)
	// Suspend reports whether the query exists; Rewind returns
	// celldb.ErrNoQuery when it does not.
	Suspend(ctx context.Context, tenant, name, group string, suspended bool) (found bool, err error)
	Rewind(ctx context.Context, tenant, name, group, token string, to time.Time) (celldb.Rewound, error)
	// SourceLoad reads what the autoscaler needs of a query's source.
	SourceLoad(ctx context.Context, tenant, query, source, group string, windows celldb.WindowKeys) (celldb.SourceLoad, error)
	// The savepoints (broker/pg/celldb/savepoint.go); Leases counts the
	// live leases of the query's group, which a drain waits out.
	TakeSavepoint(ctx context.Context, tenant, name, group, savepoint string, pipeline *string) (celldb.Savepoint, bool, error)
	Savepoints(ctx context.Context, tenant, name string) ([]celldb.Savepoint, error)
	PruneSavepoints(ctx context.Context, tenant, name string, keep int32) (int32, error)
	RestoreSavepoint(ctx context.Context, tenant, name, group, savepoint, token string) (celldb.Restored, error)
	Leases(ctx context.Context, tenant, name, group string) (int32, error)
	// The table sinks (broker/pg/celldb/sinktable.go): a refusal is a
	// *celldb.SinkInvalid.
	SinkColumns(ctx context.Context, tenant, schema, table string) ([]celldb.SinkColumn, error)
	CreateSinkTable(ctx context.Context, tenant, table string, cols []celldb.SinkColumn, keys []string) (bool, error)
	CheckSinkTable(ctx context.Context, tenant, schema, table string, keys []string, mode string) error
}

// Config is what both reconcilers need.
type Config struct {
	Broker Registrar
	DB     CellDB
	// Tenancy says whether the broker runs with tenancy on; off, every query
	// is on the default tenant whatever its namespace says.
	Tenancy bool
	// ResyncInterval is how often a StreamQuery is re-registered and its
	// progress read, and a TenantQuota's count refreshed.
	ResyncInterval time.Duration
	// DrainPoll is how often a drain looks again for the old workers'
	// leases; zero is two seconds.
	DrainPoll time.Duration
	// Workers is how many StreamQueries are reconciled at once.
	Workers int
	// SigningSecret signs the workers' broker tokens; empty when the broker
	// has auth off.
	SigningSecret []byte
	// WorkerImage is the regent-worker image of queries that name none.
	WorkerImage string
	// WorkerBrokerURL is the broker's URL as the worker pods reach it.
	WorkerBrokerURL string
}

// Field indexes of the manager's cache.
const (
	indexQueryName   = "queryName"   // StreamQuery: the effective query name
	indexQuotaTenant = "spec.tenant" // TenantQuota
)

var indexes = []struct {
	obj   client.Object
	field string
	fn    func(client.Object) []string
}{
	{&v1.StreamQuery{}, indexQueryName, func(o client.Object) []string { return []string{o.(*v1.StreamQuery).QueryName()} }},
	{&v1.TenantQuota{}, indexQuotaTenant, func(o client.Object) []string { return []string{o.(*v1.TenantQuota).Spec.Tenant} }},
}

// Setup registers the field indexes and both reconcilers with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config) error {
	if cfg.ResyncInterval <= 0 {
		return fmt.Errorf("resync interval must be positive, not %s", cfg.ResyncInterval)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	idx := mgr.GetFieldIndexer()
	for _, ix := range indexes {
		if err := idx.IndexField(ctx, ix.obj, ix.field, ix.fn); err != nil {
			return fmt.Errorf("index %s: %w", ix.field, err)
		}
	}
	if err := (&StreamQueryReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("regent-operator"),
		Config:    cfg,
	}).setup(mgr); err != nil {
		return fmt.Errorf("set up the StreamQuery controller: %w", err)
	}
	if err := (&TenantQuotaReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("regent-operator"),
		Config:   cfg,
	}).setup(mgr); err != nil {
		return fmt.Errorf("set up the TenantQuota controller: %w", err)
	}
	return nil
}

// options are the controllers' work queue settings. Failures back off from
// a fifth of a second to a minute, so a broker that comes back is noticed
// within a minute at worst.
func options(workers int) controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: workers,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](200*time.Millisecond, time.Minute),
	}
}

// retrySoon is the answer to a conflict with a concurrent writer, or to a
// cache that has not caught up with our own last write: look again shortly.
var retrySoon = ctrl.Result{RequeueAfter: 250 * time.Millisecond}

// syncFinalizer adds or removes the finalizer name so that it is on obj
// exactly when want says.
func syncFinalizer(ctx context.Context, c client.Client, obj client.Object, name string, want bool) error {
	if controllerutil.ContainsFinalizer(obj, name) == want {
		return nil
	}
	if want {
		controllerutil.AddFinalizer(obj, name)
	} else {
		controllerutil.RemoveFinalizer(obj, name)
	}
	if err := c.Update(ctx, obj); err != nil {
		return fmt.Errorf("update finalizers of %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}
