// Package kubestack runs Regent on a real single-node cluster
// (test/kubecluster): PostgreSQL on the host, reached by pods through a
// selector-less Service, the images `make images` built imported into the
// node's containerd, and `helm install` of charts/regent. `make kube`
// (cmd/regent-kube) and the cluster e2e test (test/e2e/kube) both use it.
package kubestack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regent-mq/regent/test/chart"
	"github.com/regent-mq/regent/test/kubecluster"
	"github.com/regent-mq/regent/test/pgtest"
)

// The names the chart's defaults expect: its database.url reaches
// postgres://regent:regent@postgresql:5432/regent in the release namespace.
const (
	Release   = chart.Release
	Namespace = chart.Namespace
	dbName    = "regent"
	dbUser    = "regent"
	dbPass    = "regent"
)

// Options says where the stack lives and what it installs.
type Options struct {
	Dir      string   // the cluster's state, PostgreSQL's data, logs; emptied first
	Images   []string // image references to copy from podman into the node (make images)
	Values   []string // extra helm values files
	Chart    string   // the chart's directory; empty: this checkout's charts/regent
	Progress io.Writer
}

// Stack is Regent running on a cluster.
type Stack struct {
	*kubecluster.Cluster
	PG          *pgtest.Cluster
	DatabaseURL string // from the host, as the postgres superuser
	// BrokerURL is the broker Service's, from the host; Start returns once
	// it answers.
	BrokerURL string
}

// Start starts the cluster and PostgreSQL, loads the images and installs the
// chart, waiting until helm's --wait is satisfied and the broker Service
// answers.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if err := os.RemoveAll(o.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	// PostgreSQL runs as the postgres user, which must reach its data.
	if err := os.Chmod(o.Dir, 0o755); err != nil {
		return nil, err
	}
	c, err := kubecluster.Start(ctx, kubecluster.Options{Dir: filepath.Join(o.Dir, "cluster"), Progress: o.Progress})
	if err != nil {
		return nil, err
	}
	s := &Stack{Cluster: c}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if err := s.postgres(ctx, o.Dir); err != nil {
		return nil, err
	}
	for _, ref := range o.Images {
		if err := s.loadImage(ref, o.Dir); err != nil {
			return nil, err
		}
	}
	if o.Chart == "" {
		o.Chart = chart.Dir()
	}
	s.progress(o, "helm install %s %s", Release, o.Chart)
	args := []string{"install", Release, o.Chart, "--namespace", Namespace, "--wait", "--timeout", "3m"}
	for _, v := range o.Values {
		args = append(args, "--values", v)
	}
	if _, err := chart.Run(s.Kubeconfig, args...); err != nil {
		// What kept the release from becoming ready.
		pods, _ := s.Kubectl("", "get", "pods", "-A", "-o", "wide")
		events, _ := s.Kubectl("", "get", "events", "-n", Namespace, "--field-selector", "type=Warning")
		return nil, fmt.Errorf("%w\n%s\n%s", err, pods, events)
	}
	if err := s.waitBrokerService(ctx, time.Minute); err != nil {
		return nil, err
	}
	return s, nil
}

// waitBrokerService sets BrokerURL and waits until the Service answers
// /health there. helm's --wait ends when the pods are Ready, which can be
// before kube-proxy has programmed the Service's rules: a request 0.05 s
// later was once refused.
func (s *Stack) waitBrokerService(ctx context.Context, within time.Duration) error {
	svc, err := s.Client.CoreV1().Services(Namespace).Get(ctx, chart.Broker, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the broker Service: %w", err)
	}
	s.BrokerURL = fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	client := &http.Client{Timeout: 2 * time.Second}
	err = kubecluster.WaitFor(ctx, within, func() error {
		resp, err := client.Get(s.BrokerURL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /health: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the broker Service %s does not answer: %w", s.BrokerURL, err)
	}
	return nil
}

// Stop tears down the cluster, then PostgreSQL.
func (s *Stack) Stop() {
	s.Cluster.Stop()
	if s.PG != nil {
		s.PG.Stop()
		s.PG = nil
	}
}

func (s *Stack) progress(o Options, format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "kube: "+format+"\n", args...)
	}
}

// postgres starts PostgreSQL on the host, listening on the node's address
// too, with a role and database for Regent that pods reach with a password,
// and a Service "postgresql" without a selector whose one endpoint is it.
func (s *Stack) postgres(ctx context.Context, dir string) error {
	hba := filepath.Join(dir, "pg_hba.conf")
	rules := "local all all trust\nhost all all 127.0.0.1/32 trust\n" +
		"host all all " + kubecluster.PodCIDR + " scram-sha-256\n"
	if err := os.WriteFile(hba, []byte(rules), 0o644); err != nil {
		return err
	}
	var err error
	s.PG, err = pgtest.StartCluster(filepath.Join(dir, "pg", "data"), 0,
		"listen_addresses=127.0.0.1,"+kubecluster.NodeIP, "hba_file="+hba)
	if err != nil {
		return err
	}
	s.DatabaseURL = s.PG.URL("postgres").String()
	conn, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", dbUser, dbPass),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", dbName, dbUser),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
  labels:
    # The chart says its pods meet the restricted Pod Security Standard;
    # the API server's admission holds it to that.
    pod-security.kubernetes.io/enforce: restricted
---
apiVersion: v1
kind: Service
metadata:
  name: postgresql
  namespace: %[1]s
spec:
  ports:
  - {name: postgresql, port: 5432, targetPort: %[3]d, protocol: TCP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: postgresql-host
  namespace: %[1]s
  labels:
    kubernetes.io/service-name: postgresql
addressType: IPv4
ports:
- {name: postgresql, port: %[3]d, protocol: TCP}
endpoints:
- addresses: ["%[2]s"]
`, Namespace, kubecluster.NodeIP, s.PG.Port)
	if _, err := s.Kubectl(manifest, "apply", "-f", "-"); err != nil {
		return err
	}
	return nil
}

// AppDatabaseURL is Regent's database as the host reaches it.
func (s *Stack) AppDatabaseURL() string {
	u := s.PG.URL(dbName)
	return u.String()
}

// loadImage copies an image from podman's store into the node's containerd.
func (s *Stack) loadImage(ref, dir string) error {
	archive := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
	defer os.Remove(archive)
	out, err := exec.Command("podman", "save", "--format", "docker-archive", "-o", archive, ref).CombinedOutput()
	if err != nil {
		return fmt.Errorf("podman save %s (run `make images`): %w: %s", ref, err, out)
	}
	return s.ImportImage(archive)
}

// WaitRollout waits until a Deployment's rollout is complete.
func (s *Stack) WaitRollout(name string, within time.Duration) error {
	_, err := s.Kubectl("", "-n", Namespace, "rollout", "status", "deployment/"+name, "--timeout", within.String())
	return err
}
