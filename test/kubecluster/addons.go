package kubecluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The images built here, not pulled: nothing else is reachable.
const (
	PauseImage   = "localhost/regent-kube/pause:" + "v1.37.2"
	CoreDNSImage = "localhost/regent-kube/coredns:v1.14.6"
)

// ImportImage loads an image archive (OCI or docker, as `podman save`
// writes them) into the containerd namespace the kubelet uses, so that pods
// find it without a pull.
func (c *Cluster) ImportImage(archive string) error {
	out, err := exec.Command("ctr", "--address", c.containerdSocket(), "-n", "k8s.io", "images", "import", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", archive, err, out)
	}
	return nil
}

// TagImage gives an imported image another name, as a registry push of a
// new tag would.
func (c *Cluster) TagImage(src, dst string) error {
	out, err := exec.Command("ctr", "--address", c.containerdSocket(), "-n", "k8s.io", "images", "tag", "--force", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images tag %s %s: %w: %s", src, dst, err, out)
	}
	return nil
}

func (c *Cluster) importBuiltImages() error {
	for _, img := range []struct {
		ref, bin   string
		entrypoint []string
		user       string
	}{
		{PauseImage, nodeBin("pause"), []string{"/pause"}, "65535:65535"},
		{CoreDNSImage, nodeBin("coredns"), []string{"/coredns"}, "65532:65532"},
	} {
		archive := c.path("images", strings.ReplaceAll(img.ref[strings.LastIndex(img.ref, "/")+1:], ":", "-")+".tar")
		if err := os.MkdirAll(c.path("images"), 0o755); err != nil {
			return err
		}
		if err := binaryImage(archive, img.ref, img.bin, img.entrypoint, img.user); err != nil {
			return fmt.Errorf("build %s: %w", img.ref, err)
		}
		if err := c.ImportImage(archive); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) waitNodeReady(ctx context.Context, within time.Duration) error {
	return WaitFor(ctx, within, func() error {
		if err := c.Alive(); err != nil {
			return permanent{err}
		}
		n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s is not Ready: %s", NodeName, cond.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", NodeName)
	})
}

// Kubectl runs the cluster's kubectl as the admin, with stdin when it is not
// empty, and returns its output; the error carries kubectl's stderr.
func (c *Cluster) Kubectl(stdin string, args ...string) (string, error) {
	cmd := exec.Command(Kubectl(), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// dns runs CoreDNS as the cluster DNS (the manifest of k8s.io/kubernetes's
// cluster/addons/dns/coredns, with the image built here), and waits until it
// answers for the API server's Service from the host.
func (c *Cluster) dns(ctx context.Context) error {
	if _, err := c.Kubectl(coreDNSManifest, "apply", "-f", "-"); err != nil {
		return err
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "udp", DNSClusterIP+":53")
	}}
	return WaitFor(ctx, 2*time.Minute, func() error {
		if err := c.Alive(); err != nil {
			return permanent{err}
		}
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		addrs, err := r.LookupHost(lctx, "kubernetes.default.svc.cluster.local")
		if err != nil {
			return fmt.Errorf("CoreDNS does not answer yet: %w", err)
		}
		if len(addrs) != 1 || addrs[0] != apiClusterIP {
			return permanent{fmt.Errorf("CoreDNS resolves kubernetes.default to %v, not %s", addrs, apiClusterIP)}
		}
		return nil
	})
}

var coreDNSManifest = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  # Names outside the cluster are not answered: nothing outside is
  # reachable, so there is nothing to forward to. Port 1053: the binary
  # here has no file capability to bind 53 as a non-root user (the upstream
  # image's has), and the Service maps 53 to it.
  Corefile: |
    .:1053 {
        errors
        health {
            lameduck 5s
        }
        ready
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 30
        }
        cache 30
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  replicas: 1
  selector:
    matchLabels:
      k8s-app: kube-dns
  template:
    metadata:
      labels:
        k8s-app: kube-dns
    spec:
      securityContext:
        seccompProfile:
          type: RuntimeDefault
      priorityClassName: system-cluster-critical
      serviceAccountName: coredns
      containers:
      - name: coredns
        image: ` + CoreDNSImage + `
        imagePullPolicy: Never
        resources:
          limits:
            memory: 170Mi
          requests:
            cpu: 50m
            memory: 70Mi
        args: ["-conf", "/etc/coredns/Corefile"]
        volumeMounts:
        - name: config-volume
          mountPath: /etc/coredns
          readOnly: true
        ports:
        - {containerPort: 1053, name: dns, protocol: UDP}
        - {containerPort: 1053, name: dns-tcp, protocol: TCP}
        livenessProbe:
          httpGet: {path: /health, port: 8080, scheme: HTTP}
          initialDelaySeconds: 60
          timeoutSeconds: 5
          failureThreshold: 5
        readinessProbe:
          httpGet: {path: /ready, port: 8181, scheme: HTTP}
          periodSeconds: 2
        securityContext:
          allowPrivilegeEscalation: false
          runAsNonRoot: true
          capabilities:
            drop: [ALL]
          readOnlyRootFilesystem: true
      dnsPolicy: Default
      volumes:
      - name: config-volume
        configMap:
          name: coredns
          items:
          - {key: Corefile, path: Corefile}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  selector:
    k8s-app: kube-dns
  clusterIP: ` + DNSClusterIP + `
  ports:
  - {name: dns, port: 53, targetPort: 1053, protocol: UDP}
  - {name: dns-tcp, port: 53, targetPort: 1053, protocol: TCP}
`
