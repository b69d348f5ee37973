package containers_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/kubetest"
)

// repo is the IMAGE_REPO the images of this run are built as, of its own so
// that runs in other checkouts on the machine do not retag them mid-test.
var repo = fmt.Sprintf("localhost/regent-test-%d", os.Getpid())

// buildImages runs `make images` as a user would, into repo, and returns the
// names of the images it built.
func buildImages() ([]string, error) {
	cmd := exec.Command("make", "--no-print-directory", "images", "IMAGE_REPO="+repo, "CONTAINER_TOOL=podman")
	cmd.Dir = kubetest.RepoRoot()
	// A parent make's flags (-j, -k, ...) are not this make's business.
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("make images (make deps installs podman): %w\n%s", err, out)
	}
	out, err := exec.Command("podman", "images", "--filter", "reference="+repo+"/*", "--format", "{{.Repository}}:{{.Tag}}").Output()
	if err != nil {
		return nil, fmt.Errorf("podman images: %w", err)
	}
	// The filter matches images, and an image built from the same binaries
	// as the user's own carries their tags too: those are not this run's.
	var names []string
	for _, name := range strings.Fields(string(out)) {
		if strings.HasPrefix(name, repo+"/") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("make images built no image named %s/*", repo)
	}
	return names, nil
}

// removeImages removes this run's names; an image that also carries another
// name keeps it.
func removeImages(names []string) {
	if out, err := exec.Command("podman", append([]string{"rmi"}, names...)...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "podman rmi: %v\n%s", err, out)
	}
}

// imageValues point the chart at the images of this run; their tag stays the
// chart's default, its appVersion, which is what `make images` tags them with.
func imageValues() map[string]any {
	return map[string]any{
		"broker":   map[string]any{"image": map[string]any{"repository": repo + "/regent-broker"}},
		"operator": map[string]any{"image": map[string]any{"repository": repo + "/regent-operator"}},
	}
}

// podman runs podman and returns its standard output, failing the test with
// its standard error.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("podman", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// container is a container of a rendered pod spec, made ready to run with
// podman as the kubelet would start it.
type container struct {
	name    string   // podman's name for it, unique to the run
	flags   []string // the security context, the mounts and the limits, as podman run flags
	env     []string
	image   string
	command []string // the pod's command, which replaces the image's entrypoint
	args    []string
	fsGroup int64             // the group the files mounted into the container belong to
	mounts  map[string]string // the host's directory of each directory mounted
}

var containerSeq atomic.Int64

// runFlags start a podman run with what it needs on this machine, as root.
// runc, the runtime measured to work here, fails with "setrlimit ...
// Operation not permitted" unless both rlimits are given explicitly: the open
// files at the test's own hard limit, and the processes at 1000, below the
// host's limit (at the host's limit it fails too).
func runFlags(t *testing.T) []string {
	t.Helper()
	var nofile syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	return []string{"--runtime", "runc", "run",
		"--ulimit", fmt.Sprintf("nofile=%d:%d", nofile.Max, nofile.Max), "--ulimit", "nproc=1000:1000",
		// The pod's network namespace is not ours: the test's PostgreSQL and
		// control plane listen on the host's loopback, and so does the container.
		"--network", "host"}
}

// prepare resolves a container as the kubelet would: its security context
// becomes podman flags, the files of its Secret volumes are written out and
// mounted read-only where the pod mounts them, and its Secret references are
// resolved.
func prepare(t *testing.T, pod corev1.PodSpec, name string, sec secrets) container {
	t.Helper()
	var c *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			c = &pod.Containers[i]
		}
	}
	if c == nil {
		t.Fatalf("no container %s", name)
	}
	out := container{
		name:    fmt.Sprintf("regent-test-%d-%d-%s", os.Getpid(), containerSeq.Add(1), name),
		image:   c.Image,
		command: c.Command,
		args:    c.Args,
	}
	out.flags, out.fsGroup = securityFlags(t, pod.SecurityContext, c.SecurityContext)
	if limit, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		out.flags = append(out.flags, "--memory", strconv.FormatInt(limit.Value(), 10))
	}
	if limit, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		out.flags = append(out.flags, "--cpus", limit.AsDec().String())
	}
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			t.Fatalf("mount %s names no volume of the pod", m.Name)
		}
		v := pod.Volumes[i]
		if v.EmptyDir != nil {
			out.mountEmpty(t, m.MountPath)
			continue
		}
		if v.Secret == nil {
			t.Fatalf("volume %s is neither a Secret nor an emptyDir", v.Name)
		}
		var mode int32 = 0o644 // the kubelet's default for a Secret volume
		if v.Secret.DefaultMode != nil {
			mode = *v.Secret.DefaultMode
		}
		files := map[string][]byte{}
		for _, item := range v.Secret.Items {
			data, ok := sec[v.Secret.SecretName][item.Key]
			if !ok {
				t.Fatalf("volume %s: Secret %s has no key %s", v.Name, v.Secret.SecretName, item.Key)
			}
			files[item.Path] = data
		}
		out.mount(t, m.MountPath, files, os.FileMode(mode))
	}
	for _, e := range c.Env {
		value := e.Value
		switch ref := e.ValueFrom; {
		case ref == nil:
		case ref.SecretKeyRef != nil:
			data, ok := sec[ref.SecretKeyRef.Name][ref.SecretKeyRef.Key]
			if !ok {
				t.Fatalf("env %s: Secret %s has no key %s", e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
			}
			value = string(data)
		case ref.ResourceFieldRef != nil && ref.ResourceFieldRef.Resource == "limits.memory" && ref.ResourceFieldRef.Divisor.IsZero():
			limit, ok := c.Resources.Limits[corev1.ResourceMemory]
			if !ok {
				t.Fatalf("env %s: the container has no memory limit", e.Name)
			}
			value = fmt.Sprint(limit.Value()) // in bytes, as the kubelet gives it
		default:
			t.Fatalf("env %s: only secretKeyRef and limits.memory are resolved here", e.Name)
		}
		out.env = append(out.env, e.Name+"="+value)
	}
	return out
}

// securityFlags turns the pod's and the container's security contexts into
// podman flags, and fails the test on any field it does not translate, so that
// the containers run under exactly the security context the chart sets.
func securityFlags(t *testing.T, pod *corev1.PodSecurityContext, c *corev1.SecurityContext) ([]string, int64) {
	t.Helper()
	var p corev1.PodSecurityContext
	if pod != nil {
		p = *pod
	}
	var s corev1.SecurityContext
	if c != nil {
		s = *c
	}
	// The container's settings win over the pod's.
	uid, gid, nonRoot := s.RunAsUser, s.RunAsGroup, s.RunAsNonRoot
	if uid == nil {
		uid = p.RunAsUser
	}
	if gid == nil {
		gid = p.RunAsGroup
	}
	if nonRoot == nil {
		nonRoot = p.RunAsNonRoot
	}
	if uid == nil || gid == nil {
		t.Fatalf("the chart sets no runAsUser and runAsGroup; this test runs only explicit ids")
	}
	if nonRoot != nil && *nonRoot && *uid == 0 {
		t.Fatalf("runAsNonRoot with runAsUser 0: the kubelet would refuse to start the container")
	}
	flags := []string{"--user", fmt.Sprintf("%d:%d", *uid, *gid)}
	var fsGroup int64
	if p.FSGroup != nil {
		fsGroup = *p.FSGroup
		flags = append(flags, "--group-add", strconv.FormatInt(fsGroup, 10))
	}
	for _, profile := range []*corev1.SeccompProfile{p.SeccompProfile, s.SeccompProfile} {
		// RuntimeDefault is podman's own default profile: there is nothing to add.
		if profile != nil && profile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Fatalf("seccomp profile %s is not translated to podman", profile.Type)
		}
	}
	if s.AllowPrivilegeEscalation != nil && !*s.AllowPrivilegeEscalation {
		flags = append(flags, "--security-opt", "no-new-privileges")
	}
	if s.ReadOnlyRootFilesystem != nil && *s.ReadOnlyRootFilesystem {
		// No tmpfs on /tmp, /run and /var/tmp either: the kubelet gives none.
		flags = append(flags, "--read-only", "--read-only-tmpfs=false")
	}
	if s.Capabilities != nil {
		for _, capability := range s.Capabilities.Drop {
			flags = append(flags, "--cap-drop", string(capability))
		}
		for _, capability := range s.Capabilities.Add {
			flags = append(flags, "--cap-add", string(capability))
		}
	}
	p.RunAsUser, p.RunAsGroup, p.RunAsNonRoot, p.FSGroup, p.SeccompProfile = nil, nil, nil, nil, nil
	s.RunAsUser, s.RunAsGroup, s.RunAsNonRoot, s.SeccompProfile = nil, nil, nil, nil
	s.AllowPrivilegeEscalation, s.ReadOnlyRootFilesystem, s.Capabilities = nil, nil, nil
	if !reflect.DeepEqual(p, corev1.PodSecurityContext{}) || !reflect.DeepEqual(s, corev1.SecurityContext{}) {
		t.Fatalf("the chart sets security settings this test does not give podman: pod %+v, container %+v", p, s)
	}
	return flags, fsGroup
}

// mount writes files into a directory of their own and mounts it read-only at
// dir in the container, owned by the pod's fsGroup as the kubelet makes a
// Secret volume.
func (c *container) mount(t *testing.T, dir string, files map[string][]byte, mode os.FileMode) {
	t.Helper()
	host := t.TempDir()
	for name, data := range files {
		path := filepath.Join(host, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			t.Fatal(err)
		}
		// WriteFile's mode is masked by the umask; the volume's mode is not.
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, 0, int(c.fsGroup)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(host, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(host, 0, int(c.fsGroup)); err != nil {
		t.Fatal(err)
	}
	c.flags = append(c.flags, "--volume", host+":"+dir+":ro")
	if c.mounts == nil {
		c.mounts = map[string]string{}
	}
	c.mounts[dir] = host
}

// mountEmpty mounts a new directory read-write at dir in the container, as
// the kubelet makes an emptyDir: mode 0777.
func (c *container) mountEmpty(t *testing.T, dir string) {
	t.Helper()
	host := t.TempDir()
	if err := os.Chmod(host, 0o777); err != nil {
		t.Fatal(err)
	}
	c.flags = append(c.flags, "--volume", host+":"+dir)
	if c.mounts == nil {
		c.mounts = map[string]string{}
	}
	c.mounts[dir] = host
}

// readFile reads a file the container sees at path, from the host's side of
// its mount.
func (c *container) readFile(t *testing.T, path string) []byte {
	t.Helper()
	host, ok := c.mounts[filepath.Dir(path)]
	if !ok {
		t.Fatalf("%s is in no directory mounted into container %s", path, c.name)
	}
	b, err := os.ReadFile(filepath.Join(host, filepath.Base(path)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// get returns the value of an environment variable of the container.
func (c *container) get(name string) string {
	for _, e := range c.env {
		if v, ok := strings.CutPrefix(e, name+"="); ok {
			return v
		}
	}
	return ""
}

// set replaces (or adds) an environment variable of the container.
func (c *container) set(name, value string) {
	env := []string{name + "=" + value}
	for _, e := range c.env {
		if !strings.HasPrefix(e, name+"=") {
			env = append(env, e)
		}
	}
	c.env = env
}

// cmd is the podman run command of the container, in the foreground: its
// exit status is the container's.
func (c *container) cmd(t *testing.T) *exec.Cmd {
	t.Helper()
	entrypoint, err := json.Marshal(c.command)
	if err != nil {
		t.Fatal(err)
	}
	args := append(runFlags(t), "--name", c.name)
	args = append(args, c.flags...)
	for _, e := range c.env {
		args = append(args, "--env", e)
	}
	args = append(args, "--entrypoint", string(entrypoint), c.image)
	return exec.Command("podman", append(args, c.args...)...)
}

// run runs the container to its end, as a Job's pod.
func (c *container) run(t *testing.T) {
	t.Helper()
	if out, err := c.cmd(t).CombinedOutput(); err != nil {
		t.Errorf("container %s failed: %v\n%s", c.name, err, out)
	}
	c.remove(t)
}

// start runs the container until the test ends, then stops it with SIGTERM
// as the kubelet does and expects a clean exit. It returns once ready answers
// 200.
func (c *container) start(t *testing.T, ready string) {
	t.Helper()
	var logs bytes.Buffer
	cmd := c.cmd(t)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// podman stop sends the image's stop signal, SIGTERM, and waits.
		if out, err := exec.Command("podman", "stop", "--time", "30", c.name).CombinedOutput(); err != nil {
			t.Errorf("podman stop %s: %v\n%s", c.name, err, out)
		}
		if err := <-exited; err != nil {
			t.Errorf("%s did not stop cleanly on SIGTERM: %v\n%s", c.name, err, logs.String())
		}
		c.remove(t)
	})
	brokertest.Eventually(t, 60*time.Second, func() error {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("container %s exited: %v\n%s", c.name, err, logs.String())
		default:
		}
		resp, err := http.Get(ready)
		if err != nil {
			return fmt.Errorf("container %s is not ready at %s: %w", c.name, ready, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("container %s is not ready at %s: %d", c.name, ready, resp.StatusCode)
		}
		return nil
	})
	c.refusesWrites(t)
}

// refusesWrites checks that the running container's root filesystem is
// read-only: a file copied into it is refused.
func (c *container) refusesWrites(t *testing.T) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(file, []byte("written\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("podman", "cp", file, c.name+":/probe").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "read-only file system") {
		t.Errorf("copying a file into container %s: %v, want a refusal of its read-only root\n%s", c.name, err, out)
	}
}

// remove removes the stopped container, after checking that it changed
// nothing in its filesystem: with a read-only root and no tmpfs, a binary
// that needed to write would have failed, and podman diff shows that nothing
// got past the read-only root either, beyond what podman changes itself.
func (c *container) remove(t *testing.T) {
	t.Helper()
	own := usageRun(t, c.image).diff
	var changed []string
	for _, line := range strings.Split(strings.TrimSpace(podman(t, "diff", c.name)), "\n") {
		if line != "" && !strings.Contains(own, line+"\n") && !c.mountPoint(line[2:]) {
			changed = append(changed, line)
		}
	}
	if len(changed) > 0 {
		t.Errorf("container %s changed its filesystem:\n%s", c.name, strings.Join(changed, "\n"))
	}
	podman(t, "rm", "--force", c.name)
}

// mountPoint tells whether path is where a volume is mounted, or a directory
// above one: podman makes those in the container's root, as the kubelet's
// runtime does.
func (c *container) mountPoint(path string) bool {
	for dir := range c.mounts {
		if dir == path || strings.HasPrefix(dir, path+"/") {
			return true
		}
	}
	return false
}

// usage is what a run of an image with -h shows: the binary's flags, and the
// podman diff of a container whose binary only printed them, which is what
// podman changes itself (the mount points of /etc/hosts, /etc/hostname and
// /etc/resolv.conf).
type usage struct{ output, diff string }

var usages sync.Map // image name -> usage

func usageRun(t *testing.T, image string) usage {
	t.Helper()
	if u, ok := usages.Load(image); ok {
		return u.(usage)
	}
	name := fmt.Sprintf("regent-test-%d-%d-usage", os.Getpid(), containerSeq.Add(1))
	// -h makes the binary exit with 1 once it has printed its flags.
	out, _ := exec.Command("podman", append(runFlags(t), "--name", name, "--read-only", "--read-only-tmpfs=false", image, "-h")...).CombinedOutput()
	u := usage{output: string(out), diff: podman(t, "diff", name)}
	podman(t, "rm", "--force", name)
	if !strings.Contains(u.output, "(env REGENT_") {
		t.Fatalf("%s -h printed no flags:\n%s", image, out)
	}
	usages.Store(image, u)
	return u
}

// imageFiles returns the regular files of an image by path, as a container
// created from it (and never started) holds them.
func imageFiles(t *testing.T, image string) map[string][]byte {
	t.Helper()
	name := strings.TrimSpace(podman(t, "create", image))
	defer podman(t, "rm", name)
	cmd := exec.Command("podman", "export", name)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	r := tar.NewReader(stdout)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("podman export %s: %v", image, err)
		}
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("podman export %s: %v", image, err)
	}
	return files
}
