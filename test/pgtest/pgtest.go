// Package pgtest gives tests a real PostgreSQL database of their own.
//
// When REGENT_TEST_DATABASE_URL is set, databases are created on that server.
// Otherwise one throwaway cluster is started per test binary, on a free port
// under a temporary directory (as the postgres system user when running as
// root, since PostgreSQL refuses root). Each test gets a fresh database cloned
// from a template that already has the migrations applied, so tests never see
// each other's rows and may run in parallel.
//
// With REGENT_TEST_CITUS=<workers>, the throwaway cluster is a Citus cluster
// instead, a coordinator and that many workers, and each database is made on
// every node and migrated on the coordinator, which distributes the tables
// (broker/pg/migrate/CITUS.md): `make test` runs the queue and streams
// suites a third time so.
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
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/regent-mq/regent/broker/pg/migrate"
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
	cluster  *Cluster // nil when REGENT_TEST_DATABASE_URL names the server
	seeded   bool     // cluster is a copy of a seed, with its template
	citus    *Citus   // with REGENT_TEST_CITUS: cluster is its coordinator
	dir      string
	shared   []string // databases of SharedURL, dropped with the template
}

// Main runs the tests and stops the throwaway cluster afterwards, whatever
// their outcome. It does not return.
func Main(m *testing.M) { os.Exit(Run(m)) }

// MainNoLeaks is Main for a package that starts background loops: once
// its tests pass, any goroutine still running (a loop a test started and
// did not stop) fails the package.
func MainNoLeaks(m *testing.M) { os.Exit(NoLeaks(Run(m))) }

// NoLeaks turns a passing exit code into a failing one when goroutines are
// still running: for a TestMain that stopped everything it started. Idle
// keep-alive connections of the default HTTP client are closed first: they
// are the client's, not a leak of the code under test.
func NoLeaks(code int) int {
	if code != 0 {
		return code
	}
	http.DefaultClient.CloseIdleConnections()
	// The cluster's own goroutine, locked to the thread that started
	// PostgreSQL, lives until the process ends.
	if err := goleak.Find(goleak.IgnoreTopFunction("github.com/regent-mq/regent/test/pgtest.StartCluster.func1")); err != nil {
		fmt.Fprintf(os.Stderr, "goroutines left running after the tests: %v\n", err)
		return 1
	}
	return 0
}

// Run is Main for a TestMain that has more to stop before it exits (an
// envtest control plane, say): it runs the tests, stops the throwaway
// cluster, and returns the exit code.
func Run(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}

// Stop stops the throwaway cluster, for a TestMain that calls m.Run itself
// and had something to stop first (a broker shared by the package's tests).
func Stop() {
	if srv != nil {
		srv.stop()
	}
}

// URL returns the connection string of a fresh, migrated database that is
// dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	return create(t, true)
}

// SharedURL returns the connection string of a fresh, migrated database
// that lives as long as the test binary: for a broker that the tests of a
// package share, started outside any one test.
func SharedURL() (string, error) {
	once.Do(func() { srv, startErr = start() })
	if startErr != nil {
		return "", fmt.Errorf("pgtest: %w", startErr)
	}
	name := fmt.Sprintf("shared_%d_%d", os.Getpid(), seq.Add(1))
	if err := srv.createDB(name, true); err != nil {
		return "", fmt.Errorf("pgtest: create database: %w", err)
	}
	srv.shared = append(srv.shared, name)
	return srv.urlFor(name), nil
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
	if err := srv.createDB(name, migrated); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.dropDB(name); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return srv.urlFor(name)
}

// createDB copies the migrated template, or template0. On Citus, whose
// metadata a copy would carry to a database that no worker has, it makes
// the database on every node and migrates it.
func (s *server) createDB(name string, migrated bool) error {
	if s.citus != nil {
		// One at a time: two registrations of the workers at once, in two
		// databases, may collide on a worker's catalog ("tuple
		// concurrently updated").
		createMu.Lock()
		err := s.citus.CreateDatabase(name)
		createMu.Unlock()
		if err != nil || !migrated {
			return err
		}
		return migrateDB(s.urlFor(name))
	}
	tmpl := "template0"
	if migrated {
		tmpl = s.template
	}
	// Copies of one template cannot be made concurrently.
	createMu.Lock()
	defer createMu.Unlock()
	return s.exec(context.Background(), fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl))
}

func (s *server) dropDB(name string) error {
	if s.citus != nil {
		return s.citus.DropDatabase(name)
	}
	return s.exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
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
	if s.citus != nil {
		return s, nil
	}
	if s.seeded {
		s.template = seedTemplate
		return s, nil
	}
	s.template = fmt.Sprintf("regent_template_%d", os.Getpid())
	if err := s.exec(context.Background(), "CREATE DATABASE "+s.template); err != nil {
		s.stop()
		return nil, fmt.Errorf("create template database: %w", err)
	}
	if err := migrateDB(s.urlFor(s.template)); err != nil {
		s.stop()
		return nil, fmt.Errorf("template database: %w", err)
	}
	return s, nil
}

func migrateDB(url string) error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("open database to migrate: %w", err)
	}
	defer pool.Close()
	if _, err := migrate.Up(ctx, pool, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func (s *server) startCluster() error {
	dir, err := ScratchDir("regent-pgtest-")
	if err != nil {
		return fmt.Errorf("make cluster directory: %w", err)
	}
	if env := os.Getenv("REGENT_TEST_CITUS"); env != "" {
		workers, err := strconv.Atoi(env)
		if err != nil || workers < 1 {
			os.RemoveAll(dir)
			return fmt.Errorf("REGENT_TEST_CITUS=%q: want the number of Citus workers, 1 or more", env)
		}
		c, err := StartCitus(dir, workers)
		if err != nil {
			os.RemoveAll(dir)
			return err
		}
		s.citus, s.cluster, s.dir = c, c.Coordinator, dir
		s.base = c.Coordinator.URL("postgres")
		return nil
	}
	dataDir := filepath.Join(dir, "data")
	// Without a seed (it could not be made or copied), initdb runs here
	// and start migrates a template of its own.
	seed, err := seeded()
	if err == nil {
		err = copySeed(seed, dataDir)
	}
	if err == nil {
		s.seeded = true
	} else {
		fmt.Fprintf(os.Stderr, "pgtest: no seed, initdb instead: %v\n", err)
		os.RemoveAll(dataDir)
	}
	c, err := StartCluster(dataDir, 0, throwaway...)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	s.cluster, s.dir = c, dir
	s.base = c.URL("postgres")
	return nil
}

func (s *server) stop() {
	if s.cluster == nil {
		// A shared server: leave it running, but take the template and
		// the shared databases away.
		for _, name := range append(s.shared, s.template) {
			if name != "" {
				_ = s.exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			}
		}
		return
	}
	if s.citus != nil {
		s.citus.Stop()
	} else {
		s.cluster.Stop()
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

// BinDir finds the PostgreSQL server binaries: REGENT_PG_BIN, or the newest
// Debian-style /usr/lib/postgresql/<major>/bin.
func BinDir() (string, error) {
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
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts asks the kernel for n distinct free TCP ports on the loopback
// interface. It holds each until it has them all: a port closed and asked
// for again can come back, and two servers given it collide.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
