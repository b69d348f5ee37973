// Command regent-kube runs Regent on a real single-node Kubernetes cluster on
// this machine until Ctrl-C: etcd, kube-apiserver, controller manager,
// scheduler, containerd, kubelet, kube-proxy and CoreDNS; PostgreSQL on the
// host behind a selector-less Service; and `helm install` of charts/regent
// with the images `make images` built. `make kube` builds and runs it; it
// needs root. State and logs live under .regent-kube/, emptied at each start.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/chart"
	"github.com/regent-mq/regent/test/kubestack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "regent-kube:", err)
		os.Exit(1)
	}
}

func run() error {
	o := kubestack.Options{Progress: os.Stdout}
	var imageRepo, version string
	f := config.NewFlags("regent-kube", os.Getenv)
	f.StrEnv(&o.Dir, "dir", "REGENT_KUBE_DIR", ".regent-kube", "where the cluster's state, PostgreSQL's data and the logs live")
	f.StrEnv(&imageRepo, "image-repo", "IMAGE_REPO", "ghcr.io/regent-mq", "the repository of the images make images built")
	f.StrEnv(&version, "version", "VERSION", "", "the images' tag (the chart's appVersion)")
	// A relative default: the binary is built with -trimpath, so it cannot
	// find its checkout by its own source path; make kube runs it there.
	f.StrEnv(&o.Chart, "chart", "REGENT_CHART", "charts/regent", "the chart to install")
	if err := f.Parse(os.Args[1:]); err != nil {
		return err
	}
	for _, p := range []*string{&o.Dir, &o.Chart} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	if version == "" {
		return fmt.Errorf("no image tag: set VERSION (make kube does)")
	}
	o.Images = []string{imageRepo + "/regent-broker:" + version, imageRepo + "/regent-operator:" + version, imageRepo + "/regent-worker:" + version}
	if imageRepo != "ghcr.io/regent-mq" {
		values := filepath.Join(os.TempDir(), "regent-kube-images.yaml")
		body := fmt.Sprintf("broker:\n  image:\n    repository: %[1]s/regent-broker\noperator:\n  image:\n    repository: %[1]s/regent-operator\nworker:\n  image:\n    repository: %[1]s/regent-worker\n", imageRepo)
		if err := os.WriteFile(values, []byte(body), 0o644); err != nil {
			return err
		}
		o.Values = append(o.Values, values)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	s, err := kubestack.Start(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("kube: tearing the cluster down (pods, kubelet, control plane, PostgreSQL)")
		s.Stop()
		fmt.Println("kube: stopped")
	}()
	sec, err := s.Client.CoreV1().Secrets(kubestack.Namespace).Get(ctx, chart.Signing, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("signing secret: %w", err)
	}
	token, err := auth.MintHS256(sec.Data["signing-secret"], auth.MintClaims{Subject: "kube-admin", Tenant: auth.DefaultTenant, Role: auth.Admin, TTL: 24 * time.Hour})
	if err != nil {
		return err
	}
	tokenFile := filepath.Join(o.Dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return err
	}
	kubeconfig := filepath.Join(o.Dir, "kubeconfig")
	if err := os.Symlink(s.Kubeconfig, kubeconfig); err != nil {
		return err
	}
	fmt.Printf(`
Regent runs on a single-node cluster (up in %[5]s). Component logs: %[1]s/cluster/logs/.

In another shell, from this directory:

  export KUBECONFIG=%[2]s
  export TOKEN=$(cat %[3]s)
  B=%[4]s     # the broker's Service, reachable from this machine
  kubectl get pods -A
  kubectl apply -f config/samples/
  kubectl get sq,tq -A
  curl -s $B/health

Press Ctrl-C to tear it all down.
`, o.Dir, kubeconfig, tokenFile, s.BrokerURL, time.Since(start).Round(time.Second))

	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := s.Alive(); err != nil {
				return err
			}
		}
	}
}
