package kubecluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/regent-mq/regent/test/pgtest"
)

// network makes the pod bridge with the node's address, before the CNI
// bridge plugin would on the first pod (the API server listens there), and
// lets the node forward pod traffic.
func (c *Cluster) network() error {
	steps := [][]string{
		{"ip", "link", "add", bridgeLink, "type", "bridge"},
		{"ip", "addr", "add", NodeIP + "/24", "dev", bridgeLink},
		{"ip", "link", "set", bridgeLink, "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	// kube-proxy's Service rules see traffic between pods on one bridge
	// only when bridged packets pass through iptables.
	for file, value := range map[string]string{
		"/proc/sys/net/ipv4/ip_forward":                "1",
		"/proc/sys/net/bridge/bridge-nf-call-iptables": "1",
	} {
		if err := os.WriteFile(file, []byte(value), 0o644); err != nil {
			return fmt.Errorf("set %s: %w", file, err)
		}
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "regent-kube",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, bridgeLink, PodCIDR, c.path("cni", "ipam"))
	return os.WriteFile(c.path("cni", "net.d", "10-regent-kube.conflist"), []byte(conf), 0o644)
}

func (c *Cluster) containerdSocket() string { return filepath.Join(runDir, "containerd.sock") }

func (c *Cluster) node(ctx context.Context) error {
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # WORKAROUND: the sandbox withholds CAP_SYS_RESOURCE, so no process may
  # lower its oom_score_adj below 0; the pause container's -998 (and a
  # Guaranteed pod's -997) made runc fail with "failed to update
  # /proc/self/oom_score_adj: Permission denied". This clamps them to
  # containerd's own score, as for rootless containerd.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, c.path("containerd"), filepath.Join(runDir, "containerd"), c.containerdSocket(), PauseImage, c.path("cni", "net.d"))
	if err := os.WriteFile(c.path("containerd.toml"), []byte(config), 0o644); err != nil {
		return err
	}
	if _, err := c.spawn("containerd", "containerd", "--config", c.path("containerd.toml")); err != nil {
		return err
	}
	if err := WaitFor(ctx, 30*time.Second, func() error {
		_, err := os.Stat(c.containerdSocket())
		return err
	}); err != nil {
		return fmt.Errorf("containerd did not start (see %s): %w", c.LogPath("containerd"), err)
	}
	if err := c.importBuiltImages(); err != nil {
		return err
	}

	kubeletConfig := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
clusterDNS: [%s]
podLogsDir: %s
tlsCertFile: %s
tlsPrivateKeyFile: %s
# WORKAROUND: this machine has cgroup v1 only (its memory controller is
# already in use by the sandbox, so v2 cannot take it over), which kubelet
# 1.37 refuses unless told otherwise.
failCgroupV1: false
# WORKAROUND: no systemd here; the kubelet manages cgroups through the files.
cgroupDriver: cgroupfs
# WORKAROUND: no QoS cgroup tree and no node allocatable enforcement: the
# sandbox's cgroup hierarchy is not the kubelet's to reorganise.
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
# kube-proxy makes the rules Services need; the kubelet's own chains
# (KUBE-FIREWALL, its canaries) would outlive the cluster on a shared host.
makeIPTablesUtilChains: false
# The disk is shared with other work: evict nothing and collect no images
# because of its fill level.
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
serializeImagePulls: false
maxPods: 60
`, c.containerdSocket(), NodeIP, c.ca.CAFile(), DNSClusterIP, c.path("pod-logs"),
		c.ca.certFile("kubelet"), c.ca.keyFile("kubelet"))
	if err := os.WriteFile(c.path("kubelet.yaml"), []byte(kubeletConfig), 0o644); err != nil {
		return err
	}
	if _, err := c.spawn("kubelet", nodeBin("kubelet"), "--config", c.path("kubelet.yaml"),
		"--kubeconfig", c.path("kubelet.kubeconfig"), "--root-dir", c.path("kubelet"),
		"--hostname-override", NodeName, "--node-ip", NodeIP, "--v=1"); err != nil {
		return err
	}

	ports, err := pgtest.FreePorts(2)
	if err != nil {
		return err
	}
	healthzPort, metricsPort := ports[0], ports[1]
	proxyConfig := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
# WORKAROUND: leave the conntrack table's size and timeouts as the host has
# them (0 = do not set): they are the machine's, not the cluster's.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.path("kube-proxy.kubeconfig"), NodeName, PodCIDR, NodeIP, healthzPort, metricsPort)
	if err := os.WriteFile(c.path("kube-proxy.yaml"), []byte(proxyConfig), 0o644); err != nil {
		return err
	}
	if _, err := c.spawn("kube-proxy", nodeBin("kube-proxy"), "--config", c.path("kube-proxy.yaml"), "--v=1"); err != nil {
		return err
	}
	c.progress("waiting for node %s to be Ready", NodeName)
	return c.waitNodeReady(ctx, 2*time.Minute)
}
