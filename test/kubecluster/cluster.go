// Package kubecluster runs a real single-node Kubernetes cluster on this
// machine, from parts it can get: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet and kube-proxy built from
// the Go module proxy (hack/deps.sh, hack/kube-deps.sh), containerd, runc and
// the CNI plugins from Debian, and CoreDNS as the cluster's DNS. Pods run in
// containerd under the kubelet, on a bridge network of their own; Services
// work through kube-proxy's iptables rules. `make kube` (cmd/regent-kube) and
// the cluster e2e test (test/e2e/kube) both use it.
//
// The cluster needs root, and there is one per machine: its network names
// and addresses are fixed, and a lock file keeps a second one from starting.
// The workarounds this machine's sandbox needs are marked WORKAROUND.
package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/regent-mq/regent/test/kubetest"
	"github.com/regent-mq/regent/test/pgtest"
)

// The cluster's fixed network. The node's address is the pod bridge's own,
// its pods' gateway: pods reach the host (the API server, PostgreSQL) there,
// at an address that is neither loopback, which a pod cannot reach, nor the
// machine's outside interface. (WORKAROUND: a dummy link of its own would be
// more usual, but this kernel has no dummy links.)
const (
	NodeName     = "regent-node"
	NodeIP       = "10.244.0.1"
	bridgeLink   = "regent-cni0"
	PodCIDR      = "10.244.0.0/24"
	ServiceCIDR  = "10.96.0.0/16"
	apiClusterIP = "10.96.0.1"
	DNSClusterIP = "10.96.0.10"
	apiPort      = 6443
	// runDir holds the sockets: a unix socket path must stay under 108
	// bytes, which a checkout's path does not promise.
	runDir = "/run/regent-kube"
)

// Options says where the cluster keeps its state.
type Options struct {
	Dir      string // certificates, etcd, containerd, kubelet, logs, the kubeconfig; emptied first
	Progress io.Writer
}

// Cluster is a running cluster.
type Cluster struct {
	opts       Options
	Kubeconfig string // an admin (system:masters) kubeconfig
	Client     kubernetes.Interface
	ca         *authority
	procs      []*proc
	lock       *os.File
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// Binaries: the control plane hack/deps.sh builds, and the node's parts
// hack/kube-deps.sh builds.
func controlPlaneBin(name string) string { return filepath.Join(kubetest.AssetsDir(), name) }
func nodeBin(name string) string {
	return filepath.Join(filepath.Dir(kubetest.AssetsDir()), "kube-node-"+kubetest.K8sVersion, name)
}

// Missing names the binaries that are not built yet, so that a caller can
// say which make target builds them.
func Missing() []string {
	var out []string
	for _, p := range []string{controlPlaneBin("etcd"), controlPlaneBin("kube-apiserver"), controlPlaneBin("kubectl"),
		nodeBin("kubelet"), nodeBin("kube-controller-manager"), nodeBin("kube-scheduler"), nodeBin("kube-proxy"),
		nodeBin("coredns"), nodeBin("pause")} {
		if _, err := os.Stat(p); err != nil {
			out = append(out, p)
		}
	}
	for _, tool := range []string{"containerd", "ctr", "runc", "iptables", "conntrack", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			out = append(out, tool)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		out = append(out, "/usr/lib/cni/bridge")
	}
	return out
}

// Kubectl is the kubectl built with the API server.
func Kubectl() string { return controlPlaneBin("kubectl") }

// Start brings the cluster up: certificates, etcd, the API server, the
// controller manager and scheduler, containerd, the kubelet, kube-proxy, and
// CoreDNS, then waits until the node is Ready and DNS answers. On error,
// whatever started is stopped.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a kubelet needs root")
	}
	if m := Missing(); len(m) > 0 {
		return nil, fmt.Errorf("missing %s: run `make kube-deps`", strings.Join(m, ", "))
	}
	c := &Cluster{opts: o}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	if c.lock, err = lockFile(filepath.Join(runDir, "lock")); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	// A cluster that was killed rather than stopped leaves containers,
	// mounts, links and rules behind; they go before anything starts.
	c.cleanUp()
	if err := os.RemoveAll(o.Dir); err != nil {
		return nil, fmt.Errorf("empty %s: %w", o.Dir, err)
	}
	for _, d := range []string{"logs", "cni/net.d", "manifests"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := c.network(); err != nil {
		return nil, err
	}
	if err := c.certificates(); err != nil {
		return nil, err
	}
	c.progress("starting etcd and kube-apiserver on https://%s:%d", NodeIP, apiPort)
	if err := c.controlPlane(ctx); err != nil {
		return nil, err
	}
	c.progress("starting containerd, the kubelet and kube-proxy")
	if err := c.node(ctx); err != nil {
		return nil, err
	}
	c.progress("starting CoreDNS")
	if err := c.dns(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.opts.Dir}, elem...)...)
}

func (c *Cluster) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		fmt.Fprintf(c.opts.Progress, "kube: "+format+"\n", args...)
	}
}

// LogPath is where a component's output goes.
func (c *Cluster) LogPath(name string) string { return c.path("logs", name+".log") }

// Logs returns the last n bytes of each component's log, for failures.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	for _, p := range c.procs {
		buf, _ := os.ReadFile(c.LogPath(p.name))
		if len(buf) > n {
			buf = buf[len(buf)-n:]
		}
		fmt.Fprintf(&b, "==> %s <==\n%s\n", p.name, buf)
	}
	return b.String()
}

// certificates makes the CA, the API server's serving certificate, a client
// certificate for each component and for the admin, and the service account
// signing key.
func (c *Cluster) certificates() error {
	var err error
	if c.ca, err = newAuthority(c.path("pki")); err != nil {
		return err
	}
	certs := []struct {
		name, cn string
		orgs     []string
		hosts    []string
	}{
		{"apiserver", "kube-apiserver", nil, []string{NodeIP, apiClusterIP, "127.0.0.1", "localhost",
			"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil},
		{"admin", "regent-admin", []string{"system:masters"}, nil},
		{"controller-manager", "system:kube-controller-manager", nil, nil},
		{"scheduler", "system:kube-scheduler", nil, nil},
		{"kubelet", "system:node:" + NodeName, []string{"system:nodes"}, []string{NodeIP, NodeName}},
		{"kube-proxy", "system:kube-proxy", nil, nil},
		// The service account token signer: only its key is used.
		{"sa", "service-accounts", nil, nil},
	}
	server := fmt.Sprintf("https://%s:%d", NodeIP, apiPort)
	for _, ct := range certs {
		if err := c.ca.issue(ct.name, ct.cn, ct.orgs, ct.hosts...); err != nil {
			return err
		}
		if ct.hosts == nil || ct.name == "kubelet" {
			if err := c.ca.kubeconfig(c.path(ct.name+".kubeconfig"), ct.name, server); err != nil {
				return err
			}
		}
	}
	c.Kubeconfig = c.path("admin.kubeconfig")
	return nil
}

func (c *Cluster) controlPlane(ctx context.Context) error {
	ports, err := pgtest.FreePorts(2)
	if err != nil {
		return err
	}
	etcdPort, peerPort := ports[0], ports[1]
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	if _, err := c.spawn("etcd", controlPlaneBin("etcd"), "--data-dir", c.path("etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return err
	}
	pki := c.ca
	api, err := c.spawn("kube-apiserver", controlPlaneBin("kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", NodeIP, "--advertise-address", NodeIP, "--secure-port", strconv.Itoa(apiPort),
		"--service-cluster-ip-range", ServiceCIDR,
		"--authorization-mode", "Node,RBAC",
		"--client-ca-file", pki.CAFile(),
		"--tls-cert-file", pki.certFile("apiserver"), "--tls-private-key-file", pki.keyFile("apiserver"),
		"--kubelet-client-certificate", pki.certFile("apiserver-kubelet-client"),
		"--kubelet-client-key", pki.keyFile("apiserver-kubelet-client"),
		// The node's name resolves nowhere: logs and exec go to its address.
		"--kubelet-preferred-address-types", "InternalIP",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(pki.dir, "sa.pub"),
		"--service-account-signing-key-file", pki.keyFile("sa"),
		"--enable-admission-plugins", "NodeRestriction",
		"--profiling=false", "--v=1")
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load %s: %w", c.Kubeconfig, err)
	}
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if err := c.waitHealthy(ctx, api, "/readyz", 2*time.Minute); err != nil {
		return fmt.Errorf("kube-apiserver is not ready (see %s): %w", c.LogPath("kube-apiserver"), err)
	}
	if _, err := c.spawn("kube-controller-manager", nodeBin("kube-controller-manager"),
		"--kubeconfig", c.path("controller-manager.kubeconfig"),
		"--authentication-kubeconfig", c.path("controller-manager.kubeconfig"),
		"--authorization-kubeconfig", c.path("controller-manager.kubeconfig"),
		"--bind-address", "127.0.0.1", "--secure-port", "0",
		"--leader-elect=false", "--use-service-account-credentials",
		"--service-account-private-key-file", pki.keyFile("sa"),
		"--root-ca-file", pki.CAFile(),
		"--cluster-signing-cert-file", pki.CAFile(), "--cluster-signing-key-file", pki.keyFile("ca"),
		"--service-cluster-ip-range", ServiceCIDR,
		"--v=1"); err != nil {
		return err
	}
	if _, err := c.spawn("kube-scheduler", nodeBin("kube-scheduler"),
		"--kubeconfig", c.path("scheduler.kubeconfig"),
		"--authentication-kubeconfig", c.path("scheduler.kubeconfig"),
		"--authorization-kubeconfig", c.path("scheduler.kubeconfig"),
		"--bind-address", "127.0.0.1", "--secure-port", "0",
		"--leader-elect=false", "--v=1"); err != nil {
		return err
	}
	return nil
}

// spawn starts a component with its output in logs/<name>.log. Pdeathsig
// takes it down with this process, from a thread kept for the purpose (see
// pgtest.StartCluster).
func (c *Cluster) spawn(name, bin string, args ...string) (*proc, error) {
	logFile, err := os.OpenFile(c.LogPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	p := &proc{name: name, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.cmd = cmd
		started <- nil
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
		select {} // keep the locked thread alive; the process ends it
	}()
	if err := <-started; err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// Alive reports the first component that has exited on its own.
func (c *Cluster) Alive() error {
	for _, p := range c.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %s (see %s)", p.name, p.cmd.ProcessState, c.LogPath(p.name))
		default:
		}
	}
	return nil
}

func (c *Cluster) waitHealthy(ctx context.Context, p *proc, path string, within time.Duration) error {
	return WaitFor(ctx, within, func() error {
		select {
		case <-p.done:
			return permanent{fmt.Errorf("%s exited: %s", p.name, p.cmd.ProcessState)}
		default:
		}
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath(path).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w: %s", path, err, body)
		}
		return nil
	})
}

// permanent stops WaitFor at once.
type permanent struct{ error }

// WaitFor calls check every 250 ms until it succeeds, fails permanently
// (this package's checks can say so), or within has passed.
func WaitFor(ctx context.Context, within time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return nil
		}
		var p permanent
		if errors.As(err, &p) {
			return p.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lockFile takes an exclusive lock that the kernel releases when this
// process ends, however it ends.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another regent kube cluster runs on this machine (%s is locked): %w", path, err)
	}
	return f, nil
}
