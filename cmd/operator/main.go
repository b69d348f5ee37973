// Command operator reconciles Regent's Kubernetes resources: StreamQuery
// into registrations on the broker, TenantQuota into quota rows on the cell
// database. It is a controller-runtime manager with health and readiness
// probes, a Prometheus metrics endpoint and optional leader election.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/controllers"
	"github.com/regent-mq/regent/controllers/registration"
)

// Settings is everything the operator can be told at start.
type Settings struct {
	BrokerURL         string
	DatabaseURL       string
	SigningSecretFile string
	WorkerImage       string
	WorkerBrokerURL   string
	Tenancy           bool
	ResyncInterval    time.Duration
	LeaderElect       bool
	MetricsAddr       string
	ProbeAddr         string
	LogLevel          slog.Level
}

// parse reads args (without the program name), falling back to getenv.
func parse(args []string, getenv func(string) string) (Settings, error) {
	var s Settings
	var tenancy, level string
	f := config.NewFlags("operator", getenv)
	f.StrEnv(&s.BrokerURL, "broker-url", "REGENT_BROKER_URL", "http://localhost:6632", "base URL of the broker")
	f.StrEnv(&s.DatabaseURL, "database-url", "DATABASE_URL", "", "PostgreSQL connection string of the cell database (required)")
	f.StrEnv(&s.SigningSecretFile, "signing-secret-file", "REGENT_SIGNING_SECRET_FILE", "", "file holding the broker's HS256 secret; empty sends no token (broker with auth off)")
	f.StrEnv(&s.WorkerImage, "worker-image", "REGENT_WORKER_IMAGE", "", "regent-worker image of the StreamQueries with a pipeline that name none in spec.workers.image")
	f.StrEnv(&s.WorkerBrokerURL, "worker-broker-url", "REGENT_WORKER_BROKER_URL", "", "base URL of the broker as worker pods reach it; empty: --broker-url")
	f.StrEnv(&tenancy, "tenancy", "REGENT_TENANCY", "off", "the broker's tenancy, off or on: decides the tenant of namespaces without the streams.regent.dev/tenant label")
	f.DurationEnv(&s.ResyncInterval, "resync-interval", "REGENT_RESYNC_INTERVAL", time.Minute, "how often queries are re-registered and their progress read")
	f.BoolEnv(&s.LeaderElect, "leader-elect", "REGENT_LEADER_ELECT", false, "elect a leader, so that several replicas can run")
	f.StrEnv(&s.MetricsAddr, "metrics-bind-address", "REGENT_METRICS_ADDR", ":8080", "metrics endpoint address; 0 turns it off")
	f.StrEnv(&s.ProbeAddr, "health-probe-bind-address", "REGENT_PROBE_ADDR", ":8081", "health and readiness probe address (/healthz, /readyz)")
	f.StrEnv(&level, "log-level", "REGENT_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	if err := f.Parse(args); err != nil {
		return s, err
	}
	var errs []error
	if err := s.LogLevel.UnmarshalText([]byte(level)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	switch tenancy {
	case "on":
		s.Tenancy = true
	case "off":
	default:
		errs = append(errs, fmt.Errorf("--tenancy must be on or off, not %q", tenancy))
	}
	if s.DatabaseURL == "" {
		errs = append(errs, errors.New("--database-url (or DATABASE_URL) is required"))
	}
	if s.WorkerBrokerURL == "" {
		s.WorkerBrokerURL = s.BrokerURL
	}
	if s.ResyncInterval <= 0 {
		errs = append(errs, fmt.Errorf("--resync-interval must be positive, not %s", s.ResyncInterval))
	}
	return s, errors.Join(errs...)
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "operator:", err)
		os.Exit(1)
	}
}

// workers is how many StreamQueries are reconciled at once. A reconcile
// mostly waits on the broker, PostgreSQL and the apiserver.
const workers = 8

func run(args []string) error {
	s, err := parse(args, os.Getenv)
	if err != nil {
		return err
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: s.LogLevel}))
	ctrl.SetLogger(log)

	var secret []byte
	if s.SigningSecretFile != "" {
		b, err := os.ReadFile(s.SigningSecretFile)
		if err != nil {
			return fmt.Errorf("read --signing-secret-file: %w", err)
		}
		// Kubernetes secrets mounted from a file often end in a newline that
		// is not part of the secret; the broker trims it the same way.
		secret = []byte(strings.TrimRight(string(b), "\r\n"))
		// Fail now rather than on every registration.
		if _, err := auth.MintHS256(secret, auth.MintClaims{Tenant: auth.DefaultTenant, Role: auth.ReadWrite}); err != nil {
			return fmt.Errorf("--signing-secret-file %s: %w", s.SigningSecretFile, err)
		}
	}

	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("find the Kubernetes API: %w", err)
	}
	// One status write per query per resync, plus events: the client-side
	// default of 20 requests a second would throttle a thousand queries.
	restCfg.QPS, restCfg.Burst = 200, 400

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: s.MetricsAddr},
		HealthProbeBindAddress: s.ProbeAddr,
		LeaderElection:         s.LeaderElect,
		LeaderElectionID:       "regent-operator.streams.regent.dev",
		// In a pod the lease goes to the pod's namespace; elsewhere (a
		// local run, tests) POD_NAMESPACE names it.
		LeaderElectionNamespace: os.Getenv("POD_NAMESPACE"),
		// run returns as soon as the manager stops, so the lease can be
		// handed over at once instead of expiring.
		LeaderElectionReleaseOnCancel: true,
		// The operator watches the worker Deployments it made, not every
		// Deployment of the cluster.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: {Label: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": controllers.ManagedBy})},
		}},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	ctx := ctrl.SetupSignalHandler()
	cell, err := celldb.Open(ctx, s.DatabaseURL, workers+2)
	if err != nil {
		return err
	}
	defer cell.Close()

	if err := controllers.Setup(ctx, mgr, controllers.Config{
		Broker:          registration.New(s.BrokerURL, secret, nil),
		DB:              cell,
		Tenancy:         s.Tenancy,
		ResyncInterval:  s.ResyncInterval,
		Workers:         workers,
		SigningSecret:   secret,
		WorkerImage:     s.WorkerImage,
		WorkerBrokerURL: s.WorkerBrokerURL,
	}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready once the cell database answers: every reconcile needs it.
	if err := mgr.AddReadyzCheck("database", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		return cell.Ping(ctx)
	}); err != nil {
		return err
	}
	log.Info("operator starting", "broker", s.BrokerURL, "tenancy", s.Tenancy, "resync", s.ResyncInterval,
		"leaderElection", s.LeaderElect, "signedTokens", len(secret) > 0, "workerImage", s.WorkerImage)
	return mgr.Start(ctx)
}
