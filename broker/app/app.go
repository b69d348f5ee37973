// Package app assembles a broker from its configuration: the PostgreSQL pool,
// the migrations, authentication, metrics and every route. cmd/broker runs it,
// and tests start it in-process against a real database and a real listener.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/regent-mq/regent/broker/api/admin"
	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/console"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/api/queue"
	"github.com/regent-mq/regent/broker/api/server"
	"github.com/regent-mq/regent/broker/api/streams"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/domain/backlog"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/domain/flags"
	"github.com/regent-mq/regent/broker/domain/hotlist"
	"github.com/regent-mq/regent/broker/domain/produce"
	qstore "github.com/regent-mq/regent/broker/domain/queuestore"
	"github.com/regent-mq/regent/broker/domain/quota"
	"github.com/regent-mq/regent/broker/domain/retention"
	"github.com/regent-mq/regent/broker/domain/seal"
	"github.com/regent-mq/regent/broker/domain/spool"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/tracing"
)

// Version is stamped at build time with -ldflags "-X ...app.Version=...".
var Version = "dev"

// Broker is a configured broker, ready to serve.
type Broker struct {
	cfg     config.Config
	log     *slog.Logger
	db      *db.DB
	spool   *spool.Spool
	handler http.Handler
	metrics http.Handler // the metrics listener's
	routes  []server.Route
	loops   *loops
	// stopping is closed when Serve's ctx ends: /ready fails from then on.
	stopping chan struct{}
	// stopTracing flushes the spans not yet exported.
	stopTracing func(context.Context) error
}

// shardMapEvery is how often a broker on Citus reads where the partitions'
// shards are (db.WatchNodes). A map that a rebalance made stale sends calls
// to a node that passes them on: slower, never wrong.
const shardMapEvery = 5 * time.Second

// New opens the database, applies migrations when configured to, and
// builds the handler and the background loops, which run until Close. The
// broker owns the database's pool; Close releases it.
func New(ctx context.Context, cfg config.Config, logger *slog.Logger) (*Broker, error) {
	m := metrics.New()
	authn, err := newAuthenticator(cfg, m, logger)
	if err != nil {
		return nil, err
	}
	sealer, err := newSealer(cfg)
	if err != nil {
		return nil, err
	}
	// Before the handler is built: its routes are wrapped in spans only
	// when tracing is on.
	stopTracing, err := tracing.Setup(ctx, Version)
	if err != nil {
		return nil, err
	}
	store, err := db.Open(ctx, cfg.DatabaseURL, db.Options{MaxConns: cfg.PoolSize, DedupWindow: cfg.DedupWindow,
		Route: cfg.CitusRoute})
	if err != nil {
		return nil, errors.Join(err, stopTracing(ctx))
	}
	if cfg.Migrate {
		if _, err := store.Migrate(ctx, logger); err != nil {
			store.Close()
			return nil, errors.Join(err, stopTracing(ctx))
		}
	}
	m.WatchPool(store)
	groups := backlog.New(store, m, logger)
	hot := hotlist.New()
	quotas := quota.New(store, m.QuotaRefusals, logger)
	announcer := hotlist.NewAnnouncer(hot, store, logger)
	cat := catalog.New(store, cfg.CatalogSize)
	after := commit.New(announcer, hot, m)
	producer := produce.New(store, cat, produce.Options{
		Sealer: sealer, Metrics: m, Quotas: quotas, PushCalls: cfg.PushCalls, Logger: logger,
		StoreTraceparent: cfg.StoreTraceparent,
	})
	switches := flags.New(store, logger)
	spooled, err := spool.Open(cfg.SpoolDir, producer, after, switches, m.SpoolBuffered, logger)
	if err != nil {
		store.Close()
		return nil, errors.Join(err, stopTracing(ctx))
	}
	consumers := qstore.New(store, cat, after, sealer, quotas, m, hot, logger, cfg.MaxPopBytes)
	queues := queue.New(queue.Deps{
		Store: consumers, Producer: producer, DB: store, After: after, Quotas: quotas, Metrics: m, Logger: logger,
		PopPaused: switches.PopMaintenance, DefaultMode: cfg.DefaultSubscriptionMode, Spool: spooled,
		DedupWindow: cfg.DedupWindow,
	})
	var routes []server.Route
	routes = append(routes, queues.Routes()...)
	routes = append(routes, streams.New(store, cat, producer, after, consumers, quotas, m, logger, cfg.Tenancy).Routes()...)
	routes = append(routes, admin.New(store, switches, spooled, after, sealer, cfg.Replica, logger).Routes()...)
	routes = append(routes, console.Routes()...)
	routes = append(routes, admin.NewHistory(store, logger).Routes()...)
	analytics := admin.NewAnalytics(store, cfg.Replica, sealer, logger)
	routes = append(routes, analytics.Routes()...)
	stopping := make(chan struct{})
	h := server.New(server.Deps{
		DB: store, Auth: authn, Metrics: m, Log: logger, Version: Version, MaxBodyBytes: cfg.MaxBodyBytes,
		Tenancy: cfg.Tenancy, Stopping: stopping,
	}, routes)
	sweeper := retention.New(store, logger, retention.Settings{
		DedupWindow: cfg.DedupWindow, RetentionChunk: cfg.RetentionBatch, EvictionChunk: cfg.EvictionBatch,
		CleanupAfter: time.Duration(cfg.PartitionCleanupDays) * 24 * time.Hour, MetricsAge: cfg.MetricsRetention,
	}, announcer.Announce)
	loops := start(context.WithoutCancel(ctx), []loop{
		consumers.Listen,
		func(ctx context.Context) { consumers.Reseed(ctx, cfg.ReseedInterval) },
		announcer.Run,
		func(ctx context.Context) { sweeper.Run(ctx, cfg.RetentionEvery, cfg.EvictionEvery) },
		switches.Listen,
		switches.Run,
		quotas.Listen,
		quotas.Run,
		quotas.Lease,
		func(ctx context.Context) { groups.Run(ctx, cfg.LagEvery) },
		func(ctx context.Context) {
			m.Ops.Run(ctx, store, counters.Settings{Replica: cfg.Replica, FlushEvery: cfg.AnalyticsFlush}, logger)
		},
		func(ctx context.Context) { counters.RunSamples(ctx, store, cfg.Replica, logger) },
		spooled.Run,
		authn.Run,
		func(ctx context.Context) { store.WatchNodes(ctx, shardMapEvery, logger) },
	})
	return &Broker{cfg: cfg, log: logger, db: store, spool: spooled, handler: h, metrics: server.Metrics(m),
		routes: routes, loops: loops, stopping: stopping, stopTracing: stopTracing}, nil
}

// newSealer loads the payload keys; without a key file it returns nil, and
// queues with encryptionEnabled store plaintext (with a warning).
func newSealer(cfg config.Config) (*seal.Sealer, error) {
	if cfg.EncryptionKey == "" {
		return nil, nil
	}
	s, err := seal.LoadFiles(cfg.EncryptionKey, cfg.EncryptionOld)
	if err != nil {
		return nil, fmt.Errorf("load encryption keys: %w", err)
	}
	return s, nil
}

func newAuthenticator(cfg config.Config, m *metrics.Metrics, logger *slog.Logger) (*auth.Authenticator, error) {
	ac := auth.Config{
		Mode:               cfg.Auth,
		Secret:             []byte(cfg.JWTSecret),
		JWKSURL:            cfg.JWKSURL,
		JWKSRefresh:        cfg.JWKSRefresh,
		Algorithm:          cfg.JWTAlgorithm,
		Issuer:             cfg.JWTIssuer,
		Audience:           cfg.JWTAudience,
		Tenancy:            cfg.Tenancy,
		TenantClaim:        cfg.TenantClaim,
		DefaultTokenTenant: cfg.DefaultTokenTenant,
		RoleClaim:          cfg.RoleClaim,
		RolesClaim:         cfg.RolesClaim,
		RoleValues:         map[auth.Level]string{auth.ReadOnly: cfg.RoleReadOnly, auth.ReadWrite: cfg.RoleReadWrite, auth.Admin: cfg.RoleAdmin},
		Log:                logger,
		JWKSFetched: func(ok bool) {
			outcome := "failed"
			if ok {
				outcome = "ok"
			}
			m.JWKSFetches.WithLabelValues(outcome).Inc()
		},
	}
	if cfg.JWTSecretFile != "" {
		b, err := os.ReadFile(cfg.JWTSecretFile)
		if err != nil {
			return nil, fmt.Errorf("read --jwt-secret-file: %w", err)
		}
		ac.Secret = []byte(strings.TrimRight(string(b), "\r\n"))
	}
	if cfg.JWTPublicKey != "" {
		b, err := os.ReadFile(cfg.JWTPublicKey)
		if err != nil {
			return nil, fmt.Errorf("read --jwt-public-key-file: %w", err)
		}
		ac.PublicKeyPEM = b
	}
	a, err := auth.New(ac)
	if err != nil {
		return nil, fmt.Errorf("configure auth: %w", err)
	}
	return a, nil
}

// Routes are the API routes the handler serves, with their access levels.
func (b *Broker) Routes() []server.Route { return b.routes }

// Handler is the broker's HTTP handler.
func (b *Broker) Handler() http.Handler { return b.handler }

// Close stops the background loops and releases the database pool.
func (b *Broker) Close() {
	b.loops.stop()
	if err := b.spool.Close(); err != nil {
		b.log.Error("closing the spool failed", "err", err)
	}
	b.db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlush)
	defer cancel()
	if err := b.stopTracing(ctx); err != nil {
		b.log.Error("flushing the trace spans failed", "err", err)
	}
}

// tracingFlush bounds how long Close waits for the OTLP collector.
const tracingFlush = 5 * time.Second

// Serve serves the API on api and the metrics on metrics until ctx is
// cancelled (SIGTERM), then stops in the order a rolling restart needs:
//
//  1. /ready fails at once, so that the endpoints drop this replica;
//  2. both listeners keep serving for the drain grace, while they do, each
//     answer closing its connection;
//  3. parked long-polls answer at once, as an empty poll does (they see
//     httpx.Draining), the listeners stop accepting, and in-flight
//     requests finish within the shutdown grace;
//
// then it returns, and Close stops the loops (each finishes its last flush)
// and seals the spool, fsync'd, for the next start to drain. Requests are
// not cancelled with ctx: a push in flight when a pod is told to stop must
// still be answered (cancelled, it was answered an empty 200, stored or
// not). Whatever still runs when the shutdown grace is over is cancelled.
func (b *Broker) Serve(ctx context.Context, api, metrics net.Listener) error {
	reqCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	drain := make(chan struct{})
	base := httpx.WithDrain(reqCtx, drain)
	srv := &http.Server{
		Handler: b.handler,
		// ReadTimeout bounds the reading of a request, its body included;
		// net/http lifts the deadline once the body is read, so a long-poll
		// still parks for its whole timeout. For the same reason there is no
		// WriteTimeout: a long-poll answers up to 10 minutes after it asked.
		ReadHeaderTimeout: b.cfg.ReadHeaderTimeout,
		ReadTimeout:       b.cfg.ReadTimeout,
		IdleTimeout:       b.cfg.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(b.log.Handler(), slog.LevelWarn),
	}
	msrv := &http.Server{
		Handler:           b.metrics,
		ReadHeaderTimeout: b.cfg.ReadHeaderTimeout,
		ReadTimeout:       b.cfg.ReadTimeout,
		IdleTimeout:       b.cfg.IdleTimeout,
		ErrorLog:          srv.ErrorLog,
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(server.JSONProtocolErrors(api)) }()
	go func() { errc <- msrv.Serve(metrics) }()
	failed := func(err error) error {
		srv.Close()
		msrv.Close()
		return fmt.Errorf("serve: %w", err)
	}
	select {
	case err := <-errc:
		return failed(err)
	case <-ctx.Done():
	}
	close(b.stopping)
	// Each answer closes its connection from now on, so that a client's
	// next request opens a new one, which the Service sends to a replica
	// still ready, rather than waiting on this one until it closes.
	srv.SetKeepAlivesEnabled(false)
	b.log.Info("stopping: /ready fails; still serving for the drain grace", "grace", b.cfg.DrainGrace)
	grace := time.NewTimer(b.cfg.DrainGrace)
	defer grace.Stop()
	select {
	case err := <-errc:
		return failed(err)
	case <-grace.C:
	}
	close(drain)
	b.log.Info("shutting down: draining in-flight requests", "grace", b.cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.ShutdownGrace)
	defer cancel()
	// The API first: the metrics stay up while its last requests count.
	err := srv.Shutdown(sctx)
	err = errors.Join(err, msrv.Shutdown(sctx))
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	for range 2 {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	return nil
}
