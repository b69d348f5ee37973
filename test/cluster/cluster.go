// Package cluster runs several broker processes on one PostgreSQL database,
// as replicas run in production, so that tests can drive them over HTTP,
// SIGKILL them and start them again. The broker binary is built once per
// test binary; a package that uses it routes its TestMain through Main.
//
//	func TestMain(m *testing.M) { cluster.Main(m) }
package cluster

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Main runs the tests, then stops pgtest's cluster and removes the binaries
// built for them. It does not return.
func Main(m *testing.M) {
	code := pgtest.Run(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// Binary builds one of the module's commands (for example "broker" or
// "regent-worker") the first time it is asked for in this test binary, and
// returns its path.
func Binary(t testing.TB, command string) string {
	t.Helper()
	buildOnce.Do(func() { binDir, buildErr = os.MkdirTemp("", "regent-cluster-bin-") })
	if buildErr != nil {
		t.Fatalf("cluster: %v", buildErr)
	}
	builds.Lock()
	defer builds.Unlock()
	bin := filepath.Join(binDir, command)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	out, err := exec.Command("go", "build", "-o", bin, "github.com/regent-mq/regent/cmd/"+command).CombinedOutput()
	if err != nil {
		t.Fatalf("cluster: build %s: %v\n%s", command, err, out)
	}
	return bin
}

var builds sync.Mutex

// Broker is one broker process, on an address it keeps across restarts.
type Broker struct {
	Addr       string // host:port
	URL        string // http://host:port
	MetricsURL string // the metrics listener's http://host:port
	t          testing.TB
	bin        string
	args       []string
	log        *os.File
	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{}
}

// Start starts n brokers on the database dbURL, each with the extra flags
// args, and waits until each answers /health. They are killed when the test
// ends; their logs are kept in the test's temporary directory and printed
// when it fails.
func Start(t testing.TB, dbURL string, n int, args ...string) []*Broker {
	t.Helper()
	bin := Binary(t, "broker")
	dir := t.TempDir()
	bs := make([]*Broker, n)
	for i := range bs {
		// Both at once: a port asked for after the first was let go can be
		// the same one, and the broker's two listeners then collide.
		ports, err := pgtest.FreePorts(2)
		if err != nil {
			t.Fatal(err)
		}
		port, maddr := ports[0], "127.0.0.1:"+strconv.Itoa(ports[1])
		log, err := os.Create(filepath.Join(dir, fmt.Sprintf("broker-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		b := &Broker{Addr: addr, URL: "http://" + addr, MetricsURL: "http://" + maddr, t: t, bin: bin, log: log,
			args: append([]string{"--listen=" + addr, "--metrics-listen=" + maddr, "--database-url=" + dbURL, "--pool-size=10", "--log-level=warn",
				"--spool-dir=" + filepath.Join(dir, fmt.Sprintf("spool-%d", i))}, args...)}
		bs[i] = b
		t.Cleanup(func() {
			b.Kill()
			log.Close()
			if t.Failed() {
				if out, err := os.ReadFile(log.Name()); err == nil && len(out) > 0 {
					t.Logf("broker %d log:\n%s", i, tail(out, 4<<10))
				}
			}
		})
	}
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Go(b.Start)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return bs
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Start starts the process (again) and waits until it answers /health.
func (b *Broker) Start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	started := make(chan error, 1)
	done := make(chan struct{})
	// Pdeathsig fires when the thread that started the child exits, so the
	// child is started, and waited for, from a goroutine locked to its
	// thread: if the test binary dies without killing it, the kernel does.
	go func() {
		runtime.LockOSThread()
		cmd := exec.Command(b.bin, b.args...)
		cmd.Stdout, cmd.Stderr = b.log, b.log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		b.cmd = cmd
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		b.t.Errorf("cluster: start broker %s: %v", b.Addr, err)
		return
	}
	b.done = done
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(b.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-done:
			b.t.Errorf("cluster: broker %s exited during start", b.Addr)
			return
		default:
		}
		if time.Now().After(deadline) {
			b.t.Errorf("cluster: broker %s not healthy within 30s: %v", b.Addr, err)
			return
		}
	}
}

// Client addresses the broker, its metrics listener included, for Do,
// Metric and WaitParked.
func (b *Broker) Client() *brokertest.Broker {
	c := brokertest.At(b.URL)
	c.MetricsURL = b.MetricsURL
	return c
}

// Terminate sends SIGTERM, as the kubelet does to a pod told to stop, and
// waits until the process has exited: an error unless it exited with
// status 0 within the time given. A broker still running then is killed.
func (b *Broker) Terminate(within time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return fmt.Errorf("broker %s is not running", b.Addr)
	}
	cmd := b.cmd
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM broker %s: %w", b.Addr, err)
	}
	select {
	case <-b.done:
	case <-time.After(within):
		_ = cmd.Process.Kill()
		<-b.done
		b.cmd = nil
		return fmt.Errorf("broker %s still ran %v after SIGTERM", b.Addr, within)
	}
	b.cmd = nil
	if !cmd.ProcessState.Success() {
		return fmt.Errorf("broker %s exited with %v after SIGTERM", b.Addr, cmd.ProcessState)
	}
	return nil
}

// Kill SIGKILLs the process, without shutdown or drain, and waits for it
// to end. Killing a broker that is not running does nothing.
func (b *Broker) Kill() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Kill()
	<-b.done
	b.cmd = nil
}
