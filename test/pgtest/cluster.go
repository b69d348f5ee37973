package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a PostgreSQL server process started by this package, for the
// tests' throwaway clusters and for the local stack of `make run`.
type Cluster struct {
	DataDir  string
	Port     int
	settings []string
	cmd      *exec.Cmd
	exited   chan struct{}
}

// StartCluster starts postgres on 127.0.0.1:port over dataDir, running
// initdb first when dataDir does not hold a cluster yet. Port 0 picks a free
// port after initdb, so that the port is free for milliseconds, not for the
// seconds initdb takes, before postgres binds it. settings are extra
// `-c name=value` server settings. As root, PostgreSQL runs as the postgres
// system user, which then owns dataDir's parent.
func StartCluster(dataDir string, port int, settings ...string) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := Credential()
	if err != nil {
		return nil, err
	}
	parent := filepath.Dir(dataDir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("make cluster directory: %w", err)
	}
	if cred != nil {
		if err := os.Chown(parent, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("chown cluster directory: %w", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err != nil {
		initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", dataDir, "-U", "postgres",
			"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
		initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := initdb.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("initdb: %v: %s", err, out)
		}
	}
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	logPath := filepath.Join(parent, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open postgres log: %w", err)
	}
	args := []string{"-D", dataDir, "-p", strconv.Itoa(port), "-k", parent,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300"}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	c := &Cluster{DataDir: dataDir, Port: port, settings: settings, exited: make(chan struct{})}
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that started the child exits, so the
	// child is started from a goroutine that keeps its thread for the life of
	// the process: if the parent dies without stopping the cluster (a panic,
	// a test timeout), the kernel still kills PostgreSQL.
	go func() {
		runtime.LockOSThread()
		cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		c.cmd = cmd
		started <- nil
		_ = cmd.Wait()
		logFile.Close()
		close(c.exited)
		select {} // keep the locked thread alive; the process ends it
	}()
	if err := <-started; err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(context.Background(), c.URL("postgres").String())
		if err == nil {
			conn.Close(context.Background())
			return c, nil
		}
		select {
		case <-c.exited:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("postgres exited during start: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			c.Stop()
			return nil, fmt.Errorf("postgres did not accept connections within 30s: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL is the connection URL of database db on this cluster.
func (c *Cluster) URL(db string) *url.URL {
	return &url.URL{Scheme: "postgres", User: url.User("postgres"),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)), Path: "/" + db,
		RawQuery: "sslmode=disable"}
}

// Stop shuts the server down (fast shutdown: clients are disconnected).
func (c *Cluster) Stop() {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// Crash shuts the server down as a node that dies: immediate shutdown
// (SIGQUIT), every backend gone at once and no checkpoint, so that Restart
// recovers as after a crash. A SIGKILL would leave the backends running a
// while, holding the shared memory a restart needs.
func (c *Cluster) Crash() {
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	<-c.exited
}

// Restart stops the server (fast shutdown) and starts it again over the same
// data directory, port and settings, as an operator restarting PostgreSQL
// would. c describes the new server process afterwards.
func (c *Cluster) Restart() error {
	c.Stop()
	n, err := StartCluster(c.DataDir, c.Port, c.settings...)
	if err != nil {
		return fmt.Errorf("restart postgres: %w", err)
	}
	*c = *n
	return nil
}

// Exited is closed when the server process has ended.
func (c *Cluster) Exited() <-chan struct{} { return c.exited }
