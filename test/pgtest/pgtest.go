// Package pgtest gives tests a real PostgreSQL database of their own.
//
// When REGENT_TEST_DATABASE_URL is set, databases are created on that server.
// Otherwise one throwaway cluster is started per test binary, on a free port
// under a temporary directory (as the postgres system user when running as
// root, since PostgreSQL refuses root). Each test gets a fresh database cloned
// from a template that already has the migrations applied, so tests never see
// each other's rows and may run in parallel.
//
// A package that uses it must route its TestMain through Main, which tears the
// cluster down when the binary exits:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/migrate"
)

var (
	once     sync.Once
	srv      *server
	startErr error
	createMu sync.Mutex
	seq      atomic.Int64
)

type server struct {
	base     *url.URL // connection URL to an administrative database
	template string
	cmd      *exec.Cmd
	dir      string
	exited   chan struct{}
}

// Main runs the tests and stops the throwaway cluster afterwards, whatever
// their outcome. It does not return.
func Main(m *testing.M) {
	code := m.Run()
	if srv != nil {
		srv.stop()
	}
	os.Exit(code)
}

// URL returns the connection string of a fresh, migrated database that is
// dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	return create(t, true)
}

// EmptyURL returns the connection string of a fresh database without any
// migrations applied, for tests of the migrations themselves.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return create(t, false)
}

// New returns a pool on a fresh, migrated database. The pool is closed and the
// database dropped when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), URL(t))
	if err != nil {
		t.Fatalf("pgtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func create(t testing.TB, migrated bool) string {
	once.Do(func() { srv, startErr = start() })
	if startErr != nil {
		t.Fatalf("pgtest: %v", startErr)
	}
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), seq.Add(1))
	tmpl := "template0"
	if migrated {
		tmpl = srv.template
	}
	ctx := context.Background()
	// Copies of one template cannot be made concurrently.
	createMu.Lock()
	err := srv.exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl))
	createMu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return srv.urlFor(name)
}

func (s *server) urlFor(db string) string {
	u := *s.base
	u.Path = "/" + db
	return u.String()
}

func (s *server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.base.String())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func start() (*server, error) {
	s := &server{}
	if env := os.Getenv("REGENT_TEST_DATABASE_URL"); env != "" {
		u, err := url.Parse(env)
		if err != nil {
			return nil, fmt.Errorf("parse REGENT_TEST_DATABASE_URL: %w", err)
		}
		s.base = u
	} else if err := s.startCluster(); err != nil {
		return nil, err
	}
	s.template = fmt.Sprintf("regent_template_%d", os.Getpid())
	ctx := context.Background()
	if err := s.exec(ctx, "CREATE DATABASE "+s.template); err != nil {
		s.stop()
		return nil, fmt.Errorf("create template database: %w", err)
	}
	pool, err := pgxpool.New(ctx, s.urlFor(s.template))
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("open template database: %w", err)
	}
	_, err = migrate.Up(ctx, pool, nil)
	pool.Close()
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("migrate template database: %w", err)
	}
	return s, nil
}

func (s *server) startCluster() error {
	bin, err := binDir()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "regent-pgtest-")
	if err != nil {
		return fmt.Errorf("make cluster directory: %w", err)
	}
	s.dir = dir
	cred, err := Credential()
	if err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("chown cluster directory: %w", err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := FreePort()
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("create postgres log: %w", err)
	}
	s.exited = make(chan struct{})
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that started the child exits, so the
	// child is started from a goroutine that keeps its thread for the life of
	// the binary: if the test binary dies without running Main's teardown
	// (a panic, a timeout), the kernel still kills PostgreSQL.
	go func() {
		runtime.LockOSThread()
		cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data,
			"-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "max_connections=300", "-c", "shared_buffers=128MB")
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		s.cmd = cmd
		started <- nil
		_ = cmd.Wait()
		logFile.Close()
		close(s.exited)
		select {} // keep the locked thread alive; the binary ends it
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("start postgres: %w", err)
	}
	s.base = &url.URL{Scheme: "postgres", User: url.User("postgres"),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/postgres",
		RawQuery: "sslmode=disable"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.exec(context.Background(), "SELECT 1")
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			os.RemoveAll(dir)
			return fmt.Errorf("postgres exited during start: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return fmt.Errorf("postgres did not accept connections within 30s: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *server) stop() {
	if s.cmd == nil {
		// A shared server: leave it running, but take the template away.
		if s.template != "" {
			_ = s.exec(context.Background(), "DROP DATABASE IF EXISTS "+s.template+" WITH (FORCE)")
		}
		return
	}
	// SIGINT is PostgreSQL's fast shutdown: it disconnects clients and exits.
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	os.RemoveAll(s.dir)
}

// Credential returns the postgres system user's credential when running as
// root, and nil otherwise.
func Credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the postgres system user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// binDir finds the PostgreSQL server binaries: REGENT_PG_BIN, or the newest
// Debian-style /usr/lib/postgresql/<major>/bin.
func binDir() (string, error) {
	if d := os.Getenv("REGENT_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries found (run `make deps`, or set REGENT_PG_BIN or REGENT_TEST_DATABASE_URL)")
}

// FreePort asks the kernel for a free TCP port on the loopback interface.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
