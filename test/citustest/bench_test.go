package citustest_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"testing"

	"github.com/regent-mq/regent/test/citustest"
	"github.com/regent-mq/regent/test/pgtest"
)

// A push-shaped PL/pgSQL function: move the partition's offset, store the
// message. The same function on plain PostgreSQL and delegated on Citus.
var pushShapeSQL = []string{
	`CREATE TABLE partitions (id bigint PRIMARY KEY, next_offset bigint NOT NULL DEFAULT 0)`,
	`CREATE TABLE messages (partition_id bigint, off bigint, body text, PRIMARY KEY (partition_id, off))`,
	`CREATE FUNCTION push(p bigint, b text) RETURNS bigint LANGUAGE plpgsql AS $$
	DECLARE v bigint;
	BEGIN
		UPDATE partitions SET next_offset = next_offset + 1 WHERE id = p RETURNING next_offset - 1 INTO v;
		INSERT INTO messages VALUES (p, v, b);
		RETURN v;
	END $$`,
}

var distributePushShapeSQL = []string{
	`SELECT create_distributed_table('partitions', 'id')`,
	`SELECT create_distributed_table('messages', 'partition_id', colocate_with => 'partitions')`,
	`SELECT create_distributed_function('push(bigint,text)', '$1', colocate_with => 'partitions')`,
}

// BenchmarkPushShapedCall is the cost of one call of a push-shaped function,
// prepared, in autocommit: on plain PostgreSQL, on Citus through the
// coordinator (delegated to the worker that owns the partition's shard),
// and on Citus straight to that worker. Beside the time, each node's CPU
// per call (its server processes' user and system time: the bench's
// connections and the background workers, all alive for the run).
func BenchmarkPushShapedCall(b *testing.B) {
	const partition = 7
	plain := pgtest.Own(b)
	plainConn := connect(b, plain.URL("postgres").String())
	setUp(b, plainConn, pushShapeSQL, partition)
	run(b, "plain", plainConn, partition, map[string]*pgtest.Cluster{"node": plain})

	c, coordinator, owner := distributedPushShape(b, partition)
	nodes := map[string]*pgtest.Cluster{"coordinator": c.Coordinator, "worker": owner}
	run(b, "citus-coordinator", coordinator, partition, nodes)
	run(b, "citus-owning-worker", connect(b, owner.URL(citustest.Database).String()), partition, nodes)

	// The same tables and function, not distributed, on the coordinator
	// (workers refuse DDL): what Citus costs a node for tables it does not
	// manage.
	local := connect(b, c.URL().String())
	setUp(b, local, slices.Concat([]string{"CREATE SCHEMA local", "SET search_path = local"}, pushShapeSQL), partition)
	run(b, "citus-local-tables", local, partition, nodes)
}

// BenchmarkStatement is the cost of one prepared statement on its own, in
// autocommit, on plain PostgreSQL and on the Citus worker that owns the
// partition's shard: what Citus adds to each statement a hot function runs.
// update-const-key names the shard key as a constant (the parameter then
// only guards the statement), as a delegated function's statements cannot.
func BenchmarkStatement(b *testing.B) {
	const partition = 7
	statements := []struct{ name, sql string }{
		{"round-trip", "SELECT $1::bigint"},
		{"select-by-key", "SELECT next_offset FROM partitions WHERE id = $1"},
		{"update", "UPDATE partitions SET next_offset = next_offset + 1 WHERE id = $1"},
		{"update-const-key", "UPDATE partitions SET next_offset = next_offset + 1 WHERE id = 7 AND $1 > 0"},
		{"insert", "INSERT INTO messages VALUES ($1, (random() * 1e15)::bigint, 'x')"},
	}
	plain := pgtest.Own(b)
	plainConn := connect(b, plain.URL("postgres").String())
	setUp(b, plainConn, pushShapeSQL, partition)
	for _, s := range statements {
		runCall(b, "plain/"+s.name, s.sql, plainConn, partition, map[string]*pgtest.Cluster{"node": plain})
	}
	_, _, owner := distributedPushShape(b, partition)
	worker := connect(b, owner.URL(citustest.Database).String())
	for _, s := range statements {
		runCall(b, "citus-owning-worker/"+s.name, s.sql, worker, partition, map[string]*pgtest.Cluster{"worker": owner})
	}
}

// distributedPushShape starts a Citus cluster with the push-shaped tables
// and function distributed and the partition's row in place, and returns it,
// a connection to its coordinator and the worker that owns the partition.
func distributedPushShape(b testing.TB, partition int64) (*pgtest.Citus, *pgx.Conn, *pgtest.Cluster) {
	c := citustest.New(b, 2)
	coordinator := connect(b, c.URL().String())
	setUp(b, coordinator, slices.Concat(pushShapeSQL, distributePushShapeSQL), partition)
	var port int
	if err := coordinator.QueryRow(context.Background(), `SELECT nodeport FROM citus_shards
		WHERE shardid = get_shard_id_for_distribution_column('partitions', $1::bigint)`, partition).Scan(&port); err != nil {
		b.Fatal(err)
	}
	i := slices.IndexFunc(c.Workers, func(w *pgtest.Cluster) bool { return w.Port == port })
	if i < 0 {
		b.Fatalf("the partition's shard is on port %d, which is no worker's", port)
	}
	return c, coordinator, c.Workers[i]
}

func setUp(b testing.TB, conn *pgx.Conn, setup []string, partition int64) {
	execAll(b, conn, setup...)
	if _, err := conn.Exec(context.Background(), "INSERT INTO partitions (id) VALUES ($1)", partition); err != nil {
		b.Fatal(err)
	}
}

func run(b *testing.B, name string, conn *pgx.Conn, partition int64, nodes map[string]*pgtest.Cluster) {
	runCall(b, name, "SELECT push($1, 'x')", conn, partition, nodes)
}

func runCall(b *testing.B, name, call string, conn *pgx.Conn, partition int64, nodes map[string]*pgtest.Cluster) {
	ctx := context.Background()
	b.Run(name, func(b *testing.B) {
		before := map[string]time.Duration{}
		for n, c := range nodes {
			before[n] = serverCPU(b, c)
		}
		for b.Loop() {
			if _, err := conn.Exec(ctx, call, partition); err != nil {
				b.Fatal(err)
			}
		}
		for n, c := range nodes {
			b.ReportMetric(float64((serverCPU(b, c)-before[n]).Microseconds())/float64(b.N), n+"-cpu-µs/op")
		}
	})
}

// serverCPU is the user and system CPU time of a server's postmaster and
// its live children, from /proc (in clock ticks of 10 ms: USER_HZ is 100 on
// Linux), so a run of a few thousand calls measures it to a few percent.
func serverCPU(b *testing.B, c *pgtest.Cluster) time.Duration {
	pidFile, err := os.ReadFile(filepath.Join(c.DataDir, "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	postmaster, _, _ := strings.Cut(string(pidFile), "\n")
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, f := range stats {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue // the process ended
		}
		_, rest, _ := strings.Cut(string(raw), ") ") // after the command's name
		fields := strings.Fields(rest)               // state, ppid, … utime (12), stime (13)
		pid := filepath.Base(filepath.Dir(f))
		if len(fields) < 13 || (pid != postmaster && fields[1] != postmaster) {
			continue
		}
		for _, v := range fields[11:13] {
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
