// Package kubetest starts a real kube-apiserver and etcd through
// controller-runtime's envtest, from the binaries `make deps` builds into the
// cache (see hack/deps.sh), with Regent's CRDs installed when there are any.
//
// Start one environment per test package, from TestMain: it takes a few
// seconds and about 300 MB.
package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// K8sVersion is the control plane hack/deps.sh builds.
const K8sVersion = "v1.37.2"

// AssetsDir is where the kube-apiserver, etcd and kubectl binaries are:
// KUBEBUILDER_ASSETS when set, else the cache hack/deps.sh fills.
func AssetsDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	cache := os.Getenv("REGENT_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "regent")
	}
	return filepath.Join(cache, "k8s-"+K8sVersion)
}

// RepoRoot is the checkout this package lives in.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Environment is a running control plane.
type Environment struct {
	env    *envtest.Environment
	Config *rest.Config
}

// Start starts etcd and kube-apiserver and installs the CRDs found in
// config/crd/bases plus any extra CRD directories given.
func Start(extraCRDDirs ...string) (*Environment, error) {
	assets := AssetsDir()
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("no kube-apiserver in %s: run `make deps`: %w", assets, err)
	}
	var dirs []string
	bases := filepath.Join(RepoRoot(), "config", "crd", "bases")
	if _, err := os.Stat(bases); err == nil {
		dirs = append(dirs, bases)
	}
	dirs = append(dirs, extraCRDDirs...)
	env := ControlPlane(dirs)
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest: %w", err)
	}
	return &Environment{env: env, Config: cfg}, nil
}

// ControlPlane is an envtest environment of the cached binaries that
// installs the CRDs of crdDirs, configured to start on any host this
// repository runs on.
func ControlPlane(crdDirs []string) *envtest.Environment {
	env := &envtest.Environment{
		BinaryAssetsDirectory: AssetsDir(),
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: true,
		// make test starts several control planes beside PostgreSQL
		// clusters and image builds on two cores: the default 20 s is
		// not always enough for kube-apiserver to become ready.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	// Without an advertise address, kube-apiserver picks the global
	// address of the default route's interface, and refuses to start on a
	// host without one (a container or a network namespace, as CI
	// sandboxes often are). It serves on loopback only, so that is what it
	// advertises, the same on every host; the endpoint reconciler, which
	// refuses a loopback address, only keeps the kubernetes Service's
	// endpoints for pods, and no pod runs against this control plane.
	api := env.ControlPlane.GetAPIServer().Configure()
	api.Set("advertise-address", "127.0.0.1")
	api.Set("endpoint-reconciler-type", "none")
	return env
}

// Stop stops the control plane.
func (e *Environment) Stop() error { return e.env.Stop() }

// Kubeconfig writes a kubeconfig for an admin user of this control plane and
// returns its path, for tools such as kubectl and helm.
func (e *Environment) Kubeconfig(dir string) (string, error) {
	user, err := e.env.ControlPlane.AddUser(envtest.User{Name: "regent-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("add envtest user: %w", err)
	}
	buf, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("render kubeconfig: %w", err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}
