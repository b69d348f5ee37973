package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"github.com/jackc/pgx/v5"
)

// CitusDatabase is the database a Citus cluster's extension is created in,
// on every node.
const CitusDatabase = "regent"

// Citus is a running Citus cluster: a coordinator and its workers.
type Citus struct {
	Coordinator *Cluster
	Workers     []*Cluster
	dir         string
	settings    []string // every node's
}

// CitusInstalled reports whether Citus is installed in the PostgreSQL that pgtest
// runs: citus.so in the server's lib directory (Debian's layout, beside bin).
func CitusInstalled() (bool, error) {
	bin, err := BinDir()
	if err != nil {
		return false, err
	}
	_, err = os.Stat(filepath.Join(filepath.Dir(bin), "lib", "citus.so"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// StartCitus starts a throwaway coordinator and workers under dir (one
// directory each), with the test clusters' settings, on free ports; Stop
// removes dir.
func StartCitus(dir string, workers int, settings ...string) (*Citus, error) {
	c, err := RunCitus(dir, make([]int, 1+workers), slices.Concat(Throwaway(), settings)...)
	if err != nil {
		return nil, err
	}
	c.dir = dir
	return c, nil
}

// RunCitus starts a coordinator on ports[0] and a worker on each of the
// other ports (0 picks a free one) under dir, in dir/coordinator and
// dir/worker<n>, over the data a previous run left there, and makes
// CitusDatabase on them where it is missing. Its Stop leaves the data: `make
// run CITUS=1` starts over it again, on the same ports, since the
// coordinator knows its workers by address. The nodes start side by side:
// each one's initdb is most of the start's time.
func RunCitus(dir string, ports []int, settings ...string) (*Citus, error) {
	// As root, each node runs as the postgres user, which must reach its
	// directory below dir.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cluster directory: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open cluster directory: %w", err)
	}
	// The nodes talk to each other over loopback without TLS: Citus's
	// default asks libpq for it, which then reads the client certificate of
	// the user whose HOME the server inherited (root's, unreadable to the
	// postgres user).
	settings = slices.Concat([]string{"shared_preload_libraries=citus", "citus.node_conninfo=sslmode=disable"}, settings)
	names := []string{"coordinator"}
	for i := range len(ports) - 1 {
		names = append(names, fmt.Sprintf("worker%d", i+1))
	}
	nodes := make([]*Cluster, len(names))
	errs := make([]error, len(names))
	done := make(chan int)
	for i, name := range names {
		go func() {
			nodes[i], errs[i] = StartCluster(filepath.Join(dir, name, "data"), ports[i], settings...)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("start %s: %w", name, errs[i])
			}
			done <- i
		}()
	}
	for range names {
		<-done
	}
	c := &Citus{settings: settings}
	if len(nodes) > 0 {
		c.Coordinator, c.Workers = nodes[0], slices.DeleteFunc(nodes[1:], func(n *Cluster) bool { return n == nil })
	}
	if err := errors.Join(errs...); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.CreateDatabase(CitusDatabase); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// CreateDatabase creates a database on every node with the citus extension
// in it, and tells the coordinator's its own address, which the workers use
// to reach it, and the workers': Citus keeps its metadata per database.
// What a previous call made is kept: over the data of an earlier run it
// adds only what is missing.
func (c *Citus) CreateDatabase(name string) error {
	ctx := context.Background()
	for _, n := range c.Nodes() {
		if err := EnsureDatabase(ctx, n.URL("postgres"), name); err != nil {
			return err
		}
		if err := execOn(ctx, n.URL(name), "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
			return err
		}
	}
	conn, err := pgx.Connect(ctx, c.Coordinator.URL(name).String())
	if err != nil {
		return fmt.Errorf("connect to the coordinator: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT citus_set_coordinator_host('127.0.0.1', $1)", c.Coordinator.Port); err != nil {
		return fmt.Errorf("citus_set_coordinator_host: %w", err)
	}
	// citus_add_node answers a node it has already with that node's id.
	for _, w := range c.Workers {
		if _, err := conn.Exec(ctx, "SELECT citus_add_node('127.0.0.1', $1)", w.Port); err != nil {
			return fmt.Errorf("citus_add_node 127.0.0.1:%d: %w", w.Port, err)
		}
	}
	return nil
}

// DropDatabase drops a database of CreateDatabase on every node.
func (c *Citus) DropDatabase(name string) error {
	var errs []error
	for _, n := range c.Nodes() {
		errs = append(errs, execOn(context.Background(), n.URL("postgres"), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"))
	}
	return errors.Join(errs...)
}

// AddWorker starts one more worker and makes each of databases on it as
// CreateDatabase does, which registers it with the coordinator: a node
// joining the cluster, whose shards a rebalance then moves onto it.
func (c *Citus) AddWorker(databases ...string) (*Cluster, error) {
	// Beside the others: <dir>/worker<n>/data.
	dir := filepath.Dir(filepath.Dir(c.Coordinator.DataDir))
	w, err := StartCluster(filepath.Join(dir, fmt.Sprintf("worker%d", len(c.Workers)+1), "data"), 0, c.settings...)
	if err != nil {
		return nil, fmt.Errorf("start a worker: %w", err)
	}
	c.Workers = append(c.Workers, w)
	for _, db := range databases {
		if err := c.CreateDatabase(db); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Nodes are the coordinator, then the workers.
func (c *Citus) Nodes() []*Cluster { return append([]*Cluster{c.Coordinator}, c.Workers...) }

// URL is the connection URL of CitusDatabase on the coordinator.
func (c *Citus) URL() *url.URL { return c.Coordinator.URL(CitusDatabase) }

// Stop stops every node, and removes the directory of a cluster of
// StartCitus.
func (c *Citus) Stop() {
	for _, n := range c.Nodes() {
		if n != nil {
			n.Stop()
		}
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
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

// EnsureDatabase creates database name on the server whose administrative
// database u names, unless the server has it.
func EnsureDatabase(ctx context.Context, u *url.URL, name string) error {
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", u.Host, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s on %s: %w", name, u.Host, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s on %s: %w", name, u.Host, err)
	}
	return nil
}
