// Package citustest starts a throwaway Citus cluster on loopback: a
// coordinator and workers, each a PostgreSQL server started by pgtest with
// Citus preloaded (as the postgres system user when running as root), the
// citus extension created in one database on every node, and the workers
// registered with the coordinator, for running Regent past one primary;
// `make deps` builds Citus into the installed PostgreSQL
// (hack/citus.sh).
package citustest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/regent-mq/regent/test/pgtest"
)

// Database is the database the citus extension is created in, on every node.
const Database = "regent"

// Cluster is a running coordinator and its workers.
type Cluster struct {
	Coordinator *pgtest.Cluster
	Workers     []*pgtest.Cluster
	dir         string
}

// Installed reports whether Citus is installed in the PostgreSQL that pgtest
// runs: citus.so in the server's lib directory (Debian's layout, beside bin).
func Installed() (bool, error) {
	bin, err := pgtest.BinDir()
	if err != nil {
		return false, err
	}
	_, err = os.Stat(filepath.Join(filepath.Dir(bin), "lib", "citus.so"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// New starts a cluster of a coordinator and the given number of workers for
// the test, stopped and removed when it ends. Without Citus installed it
// skips the test, unless REGENT_REQUIRE_CITUS is set (as in CI, where a
// missing Citus is a broken toolchain, not a reason to test less).
func New(t testing.TB, workers int) *Cluster {
	t.Helper()
	ok, err := Installed()
	if err != nil {
		t.Fatalf("citustest: %v", err)
	}
	if !ok {
		msg := "citustest: Citus is not installed in this PostgreSQL (no citus.so; `make deps` builds it)"
		if os.Getenv("REGENT_REQUIRE_CITUS") != "" {
			t.Fatal(msg + ", and REGENT_REQUIRE_CITUS is set")
		}
		t.Skip(msg)
	}
	dir, err := pgtest.ScratchDir("regent-pgtest-citus-")
	if err != nil {
		t.Fatalf("citustest: make cluster directory: %v", err)
	}
	c, err := Start(dir, workers)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("citustest: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Start starts a coordinator and workers under dir (one directory each),
// which Stop removes. The nodes start side by side: each one's initdb is
// most of the start's time.
func Start(dir string, workers int, settings ...string) (*Cluster, error) {
	// As root, each node runs as the postgres user, which must reach its
	// directory below dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open cluster directory: %w", err)
	}
	// The nodes talk to each other over loopback without TLS: Citus's
	// default asks libpq for it, which then reads the client certificate of
	// the user whose HOME the server inherited (root's, unreadable to the
	// postgres user).
	settings = slices.Concat(pgtest.Throwaway(),
		[]string{"shared_preload_libraries=citus", "citus.node_conninfo=sslmode=disable"}, settings)
	names := []string{"coordinator"}
	for i := range workers {
		names = append(names, fmt.Sprintf("worker%d", i+1))
	}
	nodes := make([]*pgtest.Cluster, len(names))
	errs := make([]error, len(names))
	done := make(chan int)
	for i, name := range names {
		go func() {
			nodes[i], errs[i] = startNode(filepath.Join(dir, name, "data"), settings)
			done <- i
		}()
	}
	for range names {
		<-done
	}
	c := &Cluster{dir: dir}
	if len(nodes) > 0 {
		c.Coordinator, c.Workers = nodes[0], slices.DeleteFunc(nodes[1:], func(n *pgtest.Cluster) bool { return n == nil })
	}
	if err := errors.Join(errs...); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.register(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// startNode starts one node and creates the citus extension in Database.
func startNode(dataDir string, settings []string) (*pgtest.Cluster, error) {
	n, err := pgtest.StartCluster(dataDir, 0, settings...)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(filepath.Dir(dataDir)), err)
	}
	ctx := context.Background()
	if err := execOn(ctx, n.URL("postgres"), "CREATE DATABASE "+Database); err != nil {
		return n, err
	}
	return n, execOn(ctx, n.URL(Database), "CREATE EXTENSION citus")
}

// register tells the coordinator its own address, which the workers use to
// reach it, and adds the workers.
func (c *Cluster) register() error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.Coordinator.URL(Database).String())
	if err != nil {
		return fmt.Errorf("connect to the coordinator: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT citus_set_coordinator_host('127.0.0.1', $1)", c.Coordinator.Port); err != nil {
		return fmt.Errorf("citus_set_coordinator_host: %w", err)
	}
	for _, w := range c.Workers {
		if _, err := conn.Exec(ctx, "SELECT citus_add_node('127.0.0.1', $1)", w.Port); err != nil {
			return fmt.Errorf("citus_add_node 127.0.0.1:%d: %w", w.Port, err)
		}
	}
	return nil
}

// URL is the connection URL of Database on the coordinator.
func (c *Cluster) URL() *url.URL { return c.Coordinator.URL(Database) }

// Stop stops every node and removes the cluster's directory.
func (c *Cluster) Stop() {
	for _, n := range append([]*pgtest.Cluster{c.Coordinator}, c.Workers...) {
		if n != nil {
			n.Stop()
		}
	}
	os.RemoveAll(c.dir)
}

func execOn(ctx context.Context, u *url.URL, sql string) error {
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", u.Host, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s on %s: %w", sql, u.Host, err)
	}
	return nil
}
