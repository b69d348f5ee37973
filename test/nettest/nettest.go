// Package nettest gives tests a local TCP address that refuses connections
// for as long as they need it to, and a host without a network.
package nettest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// Port is a loopback TCP port that is bound but not listening: a dial to it
// is refused, as a broker that is down refuses it. Closing a listener to get
// such an address is not enough, since while the port is free another test
// running in parallel can be given it and answer on it.
type Port struct {
	Addr string
	fd   int
}

// Refusing reserves a Port until the test ends, or until Listen.
func Refusing(t testing.TB) *Port {
	t.Helper()
	// No SO_REUSEADDR, so that no other socket can bind the port meanwhile.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("nettest: socket: %v", err)
	}
	p := &Port{fd: fd}
	t.Cleanup(func() {
		if p.fd >= 0 {
			_ = syscall.Close(p.fd)
		}
	})
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("nettest: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("nettest: getsockname: %v", err)
	}
	p.Addr = fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	return p
}

// Listen starts listening on the port itself, so that it is never free
// between refusing and answering.
func (p *Port) Listen() (net.Listener, error) {
	if err := syscall.Listen(p.fd, syscall.SOMAXCONN); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", p.Addr, err)
	}
	f := os.NewFile(uintptr(p.fd), p.Addr)
	p.fd = -1 // f owns it now
	defer f.Close()
	l, err := net.FileListener(f) // a duplicate of f's descriptor
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", p.Addr, err)
	}
	return l, nil
}

// Isolated is a command that runs name with args in a network namespace
// of its own, whose only interface is loopback, and whose only route, with
// defaultRoute, is a default route through loopback: a host with no network,
// as CI sandboxes and containers often are. It needs root (unshare(1) and
// ip(8)); the test is skipped without it.
func Isolated(t testing.TB, defaultRoute bool, name string, args ...string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs root")
	}
	script := "ip link set lo up"
	if defaultRoute {
		script += " && ip route add default dev lo"
	}
	script += ` && exec "$@"`
	return exec.Command("unshare", append([]string{"--net", "sh", "-c", script, "sh", name}, args...)...)
}
