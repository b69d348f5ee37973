// Command regent-local runs the whole Regent stack on this machine, as local
// processes, until Ctrl-C: PostgreSQL, kube-apiserver and etcd with the CRDs,
// the broker on :6632 and the operator. Data stays under .regent/ between
// runs; -fresh starts from nothing. -citus runs a Citus cluster of a
// coordinator and 2 workers instead of one PostgreSQL. `make run` builds and
// runs it (`make run CITUS=1`).
//
//	regent-local token -tenant acme -role read-write
//
// prints a token of that stack for a tenant and access level, signed with
// its secret, for the tenants other than the default one, whose admin token
// `make run` writes to .regent/token.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/localstack"
)

func main() {
	cmd := run
	if len(os.Args) > 1 && os.Args[1] == "token" {
		cmd = token
	}
	if err := cmd(); err != nil {
		fmt.Fprintln(os.Stderr, "regent-local:", err)
		os.Exit(1)
	}
}

// token prints a token of the local stack.
func token() error {
	var dir, tenant, role string
	var ttl time.Duration
	f := config.NewFlags("regent-local token", os.Getenv)
	f.StrEnv(&dir, "dir", "REGENT_LOCAL_DIR", ".regent", "the local stack's directory, whose signing secret signs the token")
	f.StrEnv(&tenant, "tenant", "REGENT_TENANT", auth.DefaultTenant, "the token's tenant")
	f.StrEnv(&role, "role", "REGENT_ROLE", auth.ReadWrite.String(), "its access level: read-only, read-write or admin")
	f.DurationEnv(&ttl, "ttl", "REGENT_TOKEN_TTL", 24*time.Hour, "how long it is valid")
	if err := f.Parse(os.Args[2:]); err != nil {
		return err
	}
	level, err := auth.ParseLevel(role)
	if err != nil {
		return err
	}
	t, err := localstack.Token(dir, tenant, level, ttl)
	if err != nil {
		return err
	}
	fmt.Println(t)
	return nil
}

// citusWorkers are the workers of -citus, as in `make test`'s pass on Citus.
const citusWorkers = 2

func run() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o := localstack.Options{Progress: os.Stdout}
	var citus bool
	f := config.NewFlags("regent-local", os.Getenv)
	f.StrEnv(&o.Dir, "dir", "REGENT_LOCAL_DIR", ".regent", "where data, secrets, logs and the kubeconfig live")
	f.BoolEnv(&o.Fresh, "fresh", "FRESH", false, "start from empty data")
	f.StrEnv(&o.BinDir, "bin", "REGENT_BIN", filepath.Dir(exe), "where the broker and operator binaries are")
	f.StrEnv(&o.CRDDir, "crd-dir", "REGENT_CRD_DIR", "config/crd/bases", "the CRDs to install")
	f.IntEnv(&o.PGPort, "pg-port", "REGENT_PG_PORT", 6641, "PostgreSQL port (with -citus the coordinator's; the workers take the next ports)")
	f.BoolEnv(&citus, "citus", "CITUS", false, fmt.Sprintf("run a Citus cluster, a coordinator and %d workers, instead of one PostgreSQL", citusWorkers))
	f.StrEnv(&o.BrokerAddr, "broker-addr", "REGENT_BROKER_ADDR", "127.0.0.1:6632", "broker listen address")
	f.StrEnv(&o.BrokerMetricsAddr, "broker-metrics-addr", "REGENT_BROKER_METRICS_ADDR", "127.0.0.1:6682", "broker metrics listen address")
	f.StrEnv(&o.MetricsAddr, "operator-metrics-addr", "REGENT_OPERATOR_METRICS_ADDR", "127.0.0.1:6680", "operator metrics address")
	f.StrEnv(&o.ProbeAddr, "operator-probe-addr", "REGENT_OPERATOR_PROBE_ADDR", "127.0.0.1:6681", "operator health probe address")
	if err := f.Parse(os.Args[1:]); err != nil {
		return err
	}
	if citus {
		o.CitusWorkers = citusWorkers
	}
	for _, p := range []*string{&o.Dir, &o.CRDDir} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := localstack.Start(ctx, o)
	if err != nil {
		return err
	}
	database := "PostgreSQL: " + s.DatabaseURL
	if citus {
		database = fmt.Sprintf("PostgreSQL: %s (the Citus coordinator; its workers: %s)", s.DatabaseURL, strings.Join(s.WorkerURLs, " "))
	}
	defer func() {
		fmt.Println("regent: stopping the operator, the broker, the control plane and PostgreSQL")
		s.Stop()
		fmt.Println("regent: stopped")
	}()
	fmt.Printf(`
Regent is running. Logs are in %[1]s/logs/.
The console: %[4]s/console/ (sign in with the token in %[3]s)

In another shell, from this directory (the README's tour goes further):

  export PATH=$PWD/bin:$PATH KUBECONFIG=%[2]s
  export TOKEN=$(cat %[3]s)
  kubectl apply -f config/samples/
  kubectl get sq,tq -A
  curl -s %[4]s/health
  curl -s %[6]s/metrics | grep regent_messages_pushed_total   # the metrics have a port of their own
  # a page view for the default sample clicks-per-page, and the reference worker that counts it
  curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"items":[{"queue":"clicks","payload":{"key":"/home","ts":'$(date +%%s000)'}}]}' %[4]s/api/v1/push
  regent-worker -broker %[4]s -token "$TOKEN" -query clicks-per-page -source clicks -sink clicks.per_page
  # tenant acme's sample orders-per-minute needs a token of acme
  ACME=$(regent-local token -tenant acme -role read-write)

%[5]s
Press Ctrl-C to stop everything.
`, o.Dir, s.Kubeconfig, s.TokenFile, s.BrokerURL, database, s.BrokerMetricsURL)

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	pgExited := s.PostgresExited()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-pgExited:
			fmt.Println("regent: PostgreSQL has stopped; the broker reports unhealthy. Ctrl-C stops the rest.")
			pgExited = nil
		case <-tick.C:
			if err := s.Alive(); err != nil {
				return err
			}
		}
	}
}
