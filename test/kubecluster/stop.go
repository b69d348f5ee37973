package kubecluster

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Stop tears the cluster down: the kubelet first, so that it restarts
// nothing; then every pod, through containerd's CRI API, which also takes
// their network down; then the other components in the reverse order of
// Start; and last whatever the components leave on the host (mounts, links,
// kube-proxy's rules).
func (c *Cluster) Stop() {
	for i, p := range c.procs {
		if p.name == "kubelet" {
			c.stop(p)
			c.procs = append(c.procs[:i:i], c.procs[i+1:]...)
			break
		}
	}
	c.removePods()
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.stop(c.procs[i])
	}
	c.procs = nil
	c.cleanUp()
	if c.lock != nil {
		c.lock.Close()
		c.lock = nil
	}
}

func (c *Cluster) stop(p *proc) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// removePods stops and removes every pod sandbox containerd runs.
func (c *Cluster) removePods() {
	if _, err := os.Stat(c.containerdSocket()); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+c.containerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.progress("connect to containerd: %v", err)
		return
	}
	defer conn.Close()
	rt := cri.NewRuntimeServiceClient(conn)
	pods, err := rt.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		c.progress("list pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		if _, err := rt.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			c.progress("stop pod %s/%s: %v", p.Metadata.Namespace, p.Metadata.Name, err)
		}
		if _, err := rt.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			c.progress("remove pod %s/%s: %v", p.Metadata.Namespace, p.Metadata.Name, err)
		}
	}
}

// cleanUp removes what a cluster leaves on the host when it was killed
// rather than stopped, and what a stopped one leaves anyway: container
// shims of this cluster's containerd and their containers, mounts under the
// cluster's directories, kube-proxy's iptables rules and the network links.
func (c *Cluster) cleanUp() {
	killShims(c.containerdSocket())
	unmountUnder(c.opts.Dir, runDir)
	if _, err := os.Stat(nodeBin("kube-proxy")); err == nil {
		_ = exec.Command(nodeBin("kube-proxy"), "--cleanup").Run()
	}
	// What kube-proxy's cleanup leaves: the chains the kubelet makes (a
	// cluster killed before makeIPTablesUtilChains took effect, or an older
	// one) and the hint chain both make.
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, hook := range []string{"INPUT", "OUTPUT"} {
			_ = exec.Command(cmd, "-D", hook, "-j", "KUBE-FIREWALL").Run()
		}
		for _, table := range []string{"filter", "nat", "mangle"} {
			for _, chain := range []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"} {
				_ = exec.Command(cmd, "-t", table, "-F", chain).Run()
				_ = exec.Command(cmd, "-t", table, "-X", chain).Run()
			}
		}
	}
	_ = exec.Command("ip", "link", "del", bridgeLink).Run()
}

// killShims kills the containerd shims that serve the containerd at socket,
// and every process under them (the containers).
func killShims(socket string) {
	children := map[int][]int{}
	var shims []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			children[ppid] = append(children[ppid], pid)
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && strings.Contains(string(cmdline), socket) {
			shims = append(shims, pid)
		}
	}
	var kill func(pid int)
	kill = func(pid int) {
		for _, ch := range children[pid] {
			kill(ch)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, s := range shims {
		kill(s)
	}
	if len(shims) > 0 {
		time.Sleep(500 * time.Millisecond)
	}
}

// unmountUnder detaches every mount point under the directories given,
// deepest first.
func unmountUnder(dirs ...string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		point := unescapeMount(fields[4])
		for _, d := range dirs {
			if d != "" && strings.HasPrefix(point, filepath.Clean(d)+"/") {
				points = append(points, point)
				break
			}
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
