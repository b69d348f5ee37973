// Package localstack runs the whole of Regent on one machine, as local
// processes: PostgreSQL (or a Citus cluster of a coordinator and workers), a
// kube-apiserver and etcd with the CRDs installed, the broker, and the
// operator. `make run` (cmd/regent-local) and the e2e test both use it.
package localstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/test/kubetest"
	"github.com/regent-mq/regent/test/pgtest"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options says where the stack keeps its data and which ports it uses.
type Options struct {
	Dir    string // data, secrets, logs and the kubeconfig; kept across runs
	Fresh  bool   // remove Dir's data first
	BinDir string // where the broker and operator binaries are
	CRDDir string // the CRDs to install (config/crd/bases of the checkout)
	// The ports. A zero port (PGPort 0, or an address such as
	// 127.0.0.1:0) is picked free just before its process starts: a port
	// picked at the outset could be taken meanwhile by the control plane,
	// which picks its own while the stack starts.
	PGPort int
	// CitusWorkers, when above 0, makes PostgreSQL a Citus cluster: the
	// coordinator on PGPort and this many workers on the ports after it
	// (a zero PGPort picks each free), which the broker's migration
	// distributes the tables over.
	CitusWorkers int
	BrokerAddr   string // e.g. 127.0.0.1:6632
	// BrokerMetricsAddr is the broker's /metrics (e.g. 127.0.0.1:6682);
	// empty picks a free port.
	BrokerMetricsAddr string
	MetricsAddr       string // operator metrics
	ProbeAddr         string // operator health probes
	Progress          io.Writer
}

// Stack is a running local Regent.
type Stack struct {
	opts        Options
	DatabaseURL string
	BrokerURL   string
	// BrokerMetricsURL serves the broker's /metrics, apart from its API.
	BrokerMetricsURL string
	Kubeconfig       string
	TokenFile        string // an admin token for the default tenant
	// WorkerURLs are the URLs of DatabaseURL's database on the Citus
	// workers, with Options.CitusWorkers.
	WorkerURLs []string
	pg         *pgtest.Cluster // the Citus coordinator, with Options.CitusWorkers
	citus      *pgtest.Citus
	kube       *envtest.Environment
	procs      []*proc
	logs       []*os.File // the control plane's, open while it runs
}

const database = "regent"

// Start brings the stack up in dependency order. On error, whatever started
// is stopped again.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if o.Fresh {
		if err := os.RemoveAll(o.Dir); err != nil {
			return nil, fmt.Errorf("remove %s: %w", o.Dir, err)
		}
	}
	for _, d := range []string{o.Dir, filepath.Join(o.Dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("make %s: %w", d, err)
		}
	}
	if err := portsFree(o); err != nil {
		return nil, err
	}
	s := &Stack{opts: o}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	secret, err := s.secretFile(signingSecret, 32, true)
	if err != nil {
		return nil, err
	}
	key, err := s.secretFile("encryption.key", 32, false)
	if err != nil {
		return nil, err
	}

	if err := s.letPostgresReach(o.Dir); err != nil {
		return nil, err
	}
	if o.CitusWorkers > 0 {
		if err := s.startCitus(); err != nil {
			return nil, err
		}
	} else {
		s.progress("starting PostgreSQL (data in %s)", filepath.Join(o.Dir, "pg"))
		s.pg, err = pgtest.StartCluster(filepath.Join(o.Dir, "pg", "data"), o.PGPort)
		if err != nil {
			return nil, err
		}
		s.progress("PostgreSQL is up on 127.0.0.1:%d", s.pg.Port)
		if err := pgtest.EnsureDatabase(ctx, s.pg.URL("postgres"), database); err != nil {
			return nil, err
		}
	}
	s.DatabaseURL = s.pg.URL(database).String()

	s.progress("starting kube-apiserver and etcd with the CRDs installed")
	s.kube = kubetest.ControlPlane([]string{o.CRDDir})
	etcdLog, err := s.openLog("etcd")
	if err != nil {
		return nil, err
	}
	s.logs = append(s.logs, etcdLog)
	s.kube.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(o.Dir, "etcd"), Out: etcdLog, Err: etcdLog}
	apiLog, err := s.openLog("kube-apiserver")
	if err != nil {
		return nil, err
	}
	s.logs = append(s.logs, apiLog)
	api := s.kube.ControlPlane.GetAPIServer()
	api.Out, api.Err = apiLog, apiLog
	cfg, err := s.kube.Start()
	if err != nil {
		// envtest says only that it timed out: the cause is in the log.
		return nil, fmt.Errorf("start control plane: %w\n%s", err, s.logTail("kube-apiserver"))
	}
	if err := waitDiscoverable(ctx, cfg, "streams.regent.dev/v1alpha1", 60*time.Second); err != nil {
		return nil, err
	}
	user, err := s.kube.ControlPlane.AddUser(envtest.User{Name: "regent-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add control plane user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig: %w", err)
	}
	s.Kubeconfig = filepath.Join(o.Dir, "kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, kc, 0o600); err != nil {
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}

	if o.BrokerAddr, err = freeIfZero(o.BrokerAddr); err != nil {
		return nil, err
	}
	s.BrokerURL = "http://" + o.BrokerAddr
	if o.BrokerMetricsAddr == "" {
		o.BrokerMetricsAddr = "127.0.0.1:0"
	}
	if o.BrokerMetricsAddr, err = freeIfZero(o.BrokerMetricsAddr); err != nil {
		return nil, err
	}
	s.BrokerMetricsURL = "http://" + o.BrokerMetricsAddr
	s.progress("starting the broker on %s", o.BrokerAddr)
	broker, err := s.spawn("broker", nil,
		"DATABASE_URL="+s.DatabaseURL, "REGENT_LISTEN="+o.BrokerAddr, "REGENT_METRICS_LISTEN="+o.BrokerMetricsAddr, "REGENT_SPOOL_DIR="+filepath.Join(o.Dir, "spool"),
		"REGENT_AUTH=jwt", "REGENT_JWT_SECRET_FILE="+secret, "REGENT_TENANCY=on",
		"REGENT_ENCRYPTION_KEY_FILE="+key)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, broker, s.BrokerURL+"/health", 30*time.Second); err != nil {
		return nil, fmt.Errorf("broker did not become healthy: %w\n%s", err, s.logTail("broker"))
	}

	if o.MetricsAddr, err = freeIfZero(o.MetricsAddr); err != nil {
		return nil, err
	}
	if o.ProbeAddr, err = freeIfZero(o.ProbeAddr); err != nil {
		return nil, err
	}
	s.progress("starting the operator")
	operator, err := s.spawn("operator", nil,
		"KUBECONFIG="+s.Kubeconfig, "DATABASE_URL="+s.DatabaseURL, "REGENT_BROKER_URL="+s.BrokerURL,
		"REGENT_SIGNING_SECRET_FILE="+secret, "REGENT_TENANCY=on", "REGENT_RESYNC_INTERVAL=30s",
		"REGENT_METRICS_ADDR="+o.MetricsAddr, "REGENT_PROBE_ADDR="+o.ProbeAddr)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, operator, "http://"+o.ProbeAddr+"/readyz", 60*time.Second); err != nil {
		return nil, fmt.Errorf("operator did not become ready: %w\n%s", err, s.logTail("operator"))
	}

	token, err := Token(o.Dir, auth.DefaultTenant, auth.Admin, 30*24*time.Hour)
	if err != nil {
		return nil, err
	}
	s.TokenFile = filepath.Join(o.Dir, "token")
	if err := os.WriteFile(s.TokenFile, []byte(token), 0o600); err != nil {
		return nil, fmt.Errorf("write token: %w", err)
	}
	return s, nil
}

// signingSecret is the file under Dir of the broker's HS256 secret.
const signingSecret = "signing-secret"

// Token mints a token of the local stack whose data is in dir, for tenant
// at level role, valid for ttl: the admin token of the default tenant that
// Start writes, and those `regent-local token` prints for other tenants.
func Token(dir, tenant string, role auth.Level, ttl time.Duration) (string, error) {
	secret, err := os.ReadFile(filepath.Join(dir, signingSecret))
	if err != nil {
		return "", fmt.Errorf("read the local stack's signing secret (has `make run` run with this directory?): %w", err)
	}
	token, err := auth.MintHS256(secret, auth.MintClaims{Subject: "local-" + role.String(), Tenant: tenant, Role: role, TTL: ttl})
	if err != nil {
		return "", fmt.Errorf("mint a local token: %w", err)
	}
	return token, nil
}

// Stop stops everything in the reverse order of Start.
func (s *Stack) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	s.procs = nil
	if s.kube != nil {
		if err := s.kube.Stop(); err != nil {
			s.progress("stopping the control plane: %v", err)
		}
		s.kube = nil
	}
	if s.citus != nil {
		s.citus.Stop()
	} else if s.pg != nil {
		s.pg.Stop()
	}
	s.pg, s.citus = nil, nil
	for _, f := range s.logs {
		f.Close()
	}
	s.logs = nil
}

// Alive reports the first component that has exited on its own.
func (s *Stack) Alive() error {
	for _, p := range s.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %s\n%s", p.name, p.cmd.ProcessState, s.logTail(p.name))
		default:
		}
	}
	return nil
}

// PostgresExited is closed when PostgreSQL, or any node of the Citus
// cluster, has stopped. The rest of the stack keeps running without it, as
// it would in production: the broker answers 503 on /health until the
// database is back.
func (s *Stack) PostgresExited() <-chan struct{} {
	if s.citus == nil {
		return s.pg.Exited()
	}
	exited := make(chan struct{})
	var once sync.Once
	for _, n := range s.citus.Nodes() {
		go func() {
			<-n.Exited()
			once.Do(func() { close(exited) })
		}()
	}
	return exited
}

// startCitus starts a Citus cluster under Dir/citus: its coordinator is
// the stack's PostgreSQL. It keeps its data, and its ports, since the
// coordinator knows its workers by address.
func (s *Stack) startCitus() error {
	o := s.opts
	ok, err := pgtest.CitusInstalled()
	if err != nil {
		return fmt.Errorf("look for Citus: %w", err)
	}
	if !ok {
		return fmt.Errorf("a Citus cluster needs Citus built into PostgreSQL, and it has no citus.so: `make deps` builds it")
	}
	dir := filepath.Join(o.Dir, "citus")
	s.progress("starting Citus: a coordinator and %d workers (data in %s)", o.CitusWorkers, dir)
	ports := make([]int, 1+o.CitusWorkers)
	for i := range ports {
		if o.PGPort != 0 {
			ports[i] = o.PGPort + i
		}
	}
	c, err := pgtest.RunCitus(dir, ports)
	if err != nil {
		return err
	}
	s.citus, s.pg = c, c.Coordinator
	var workers []string
	for _, w := range c.Workers {
		s.WorkerURLs = append(s.WorkerURLs, w.URL(database).String())
		workers = append(workers, fmt.Sprintf("127.0.0.1:%d", w.Port))
	}
	s.progress("Citus is up: the coordinator on 127.0.0.1:%d, the workers on %s", c.Coordinator.Port, strings.Join(workers, " and "))
	return nil
}

// letPostgresReach makes dir and its parents traversable for other users
// when running as root: PostgreSQL then runs as the postgres system user,
// which must reach its data directory under dir, and a checkout in a private
// directory (root's home, mktemp -d) would otherwise stop it. Only the
// search bit is added, never read: the directories' listings stay private.
func (s *Stack) letPostgresReach(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	for d := dir; ; d = filepath.Dir(d) {
		info, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		if mode := info.Mode().Perm(); mode&0o001 == 0 {
			if err := os.Chmod(d, mode|0o001); err != nil {
				return fmt.Errorf("let the postgres user traverse %s: %w", d, err)
			}
			s.progress("made %s traversable (o+x) for the postgres user", d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func (s *Stack) progress(format string, args ...any) {
	if s.opts.Progress != nil {
		fmt.Fprintf(s.opts.Progress, "regent: "+format+"\n", args...)
	}
}

// secretFile returns the path of a secret of n random bytes, made on first
// use and kept afterwards so that data sealed or tokens minted survive a
// restart. hexText stores it as hex, for secrets used as text.
func (s *Stack) secretFile(name string, n int, hexText bool) (string, error) {
	path := filepath.Join(s.opts.Dir, name)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generate %s: %w", name, err)
	}
	if hexText {
		buf = []byte(hex.EncodeToString(buf))
	}
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return path, nil
}

// waitDiscoverable waits until the API server's discovery serves the group
// version: the operator resolves its kinds through discovery when it starts,
// and a freshly installed CRD can take a moment to appear there.
func waitDiscoverable(ctx context.Context, cfg *rest.Config, groupVersion string, within time.Duration) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	deadline := time.Now().Add(within)
	for {
		_, err := dc.ServerResourcesForGroupVersion(groupVersion)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is not served after %s: %w", groupVersion, within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
