// Command regent-local runs the whole Regent stack on this machine, as local
// processes, until Ctrl-C: PostgreSQL, kube-apiserver and etcd with the CRDs,
// the broker on :6632 and the operator. Data stays under .regent/ between
// runs; -fresh starts from nothing. `make run` builds and runs it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/localstack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "regent-local:", err)
		os.Exit(1)
	}
}

func run() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o := localstack.Options{Progress: os.Stdout}
	f := config.NewFlags("regent-local", os.Getenv)
	f.StrEnv(&o.Dir, "dir", "REGENT_LOCAL_DIR", ".regent", "where data, secrets, logs and the kubeconfig live")
	f.BoolEnv(&o.Fresh, "fresh", "FRESH", false, "start from empty data")
	f.StrEnv(&o.BinDir, "bin", "REGENT_BIN", filepath.Dir(exe), "where the broker and operator binaries are")
	f.StrEnv(&o.CRDDir, "crd-dir", "REGENT_CRD_DIR", "config/crd/bases", "the CRDs to install")
	f.IntEnv(&o.PGPort, "pg-port", "REGENT_PG_PORT", 6641, "PostgreSQL port")
	f.StrEnv(&o.BrokerAddr, "broker-addr", "REGENT_BROKER_ADDR", "127.0.0.1:6632", "broker listen address")
	f.StrEnv(&o.MetricsAddr, "operator-metrics-addr", "REGENT_OPERATOR_METRICS_ADDR", "127.0.0.1:6680", "operator metrics address")
	f.StrEnv(&o.ProbeAddr, "operator-probe-addr", "REGENT_OPERATOR_PROBE_ADDR", "127.0.0.1:6681", "operator health probe address")
	if err := f.Parse(os.Args[1:]); err != nil {
		return err
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
	defer func() {
		fmt.Println("regent: stopping the operator, the broker, the control plane and PostgreSQL")
		s.Stop()
		fmt.Println("regent: stopped")
	}()
	fmt.Printf(`
Regent is running. Logs are in %[1]s/logs/.
The console: %[4]s/console/ (sign in with the token in %[3]s)

In another shell, from this directory:

  export KUBECONFIG=%[2]s
  export TOKEN=$(cat %[3]s)
  kubectl apply -f config/samples/
  kubectl get sq,tq -A
  curl -s %[4]s/health
  curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"items":[{"queue":"orders","payload":{"id":1}}]}' %[4]s/api/v1/push

PostgreSQL: %[5]s
Press Ctrl-C to stop everything.
`, o.Dir, s.Kubeconfig, s.TokenFile, s.BrokerURL, s.DatabaseURL)

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
