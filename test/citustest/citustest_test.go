package citustest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/regent-mq/regent/test/citustest"
)

// The shape broker/pg/migrate/CITUS.md plans for Regent's schema, small: tables distributed by
// a partition id and co-located, a reference table for the catalog, and a
// function delegated to the worker that owns its partition's shard. One
// statement each: Citus refuses to distribute a function in the transaction
// that distributed a table.
var distributeSQL = []string{
	`CREATE TABLE queues (id bigint PRIMARY KEY, name text NOT NULL)`,
	`CREATE TABLE partitions (id bigint PRIMARY KEY, queue_id bigint NOT NULL)`,
	`CREATE TABLE messages (partition_id bigint, id bigserial, body text, PRIMARY KEY (partition_id, id))`,
	`SELECT create_reference_table('queues')`,
	`SELECT create_distributed_table('partitions', 'id')`,
	`SELECT create_distributed_table('messages', 'partition_id', colocate_with => 'partitions')`,
	`CREATE FUNCTION push(p bigint, b text) RETURNS bigint LANGUAGE sql AS
		'INSERT INTO messages (partition_id, body) VALUES (p, b) RETURNING id'`,
	`SELECT create_distributed_function('push(bigint,text)', '$1', colocate_with => 'partitions')`,
}

func TestClusterDistributesOverBothWorkers(t *testing.T) {
	c := citustest.New(t, 2)
	ctx := context.Background()
	conn := connect(t, c.URL().String())

	var workers int
	if err := conn.QueryRow(ctx,
		`SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0 AND isactive`).Scan(&workers); err != nil {
		t.Fatal(err)
	}
	if workers != 2 {
		t.Fatalf("pg_dist_node lists %d active workers, want 2", workers)
	}

	execAll(t, conn, distributeSQL...)

	// Each distributed table has shards on both workers; the reference table
	// has a placement on every node, the coordinator's included.
	rows, err := conn.Query(ctx, `SELECT table_name::text, citus_table_type, count(DISTINCT nodeport)
		FROM citus_shards GROUP BY 1, 2 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type placement struct {
		kind  string
		nodes int
	}
	got := map[string]placement{}
	for rows.Next() {
		var name string
		var p placement
		if err := rows.Scan(&name, &p.kind, &p.nodes); err != nil {
			t.Fatal(err)
		}
		got[name] = p
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]placement{
		"messages":   {"distributed", 2},
		"partitions": {"distributed", 2},
		"queues":     {"reference", 3},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("citus_shards: %s is %+v, want %+v", name, got[name], w)
		}
	}

	var colocated bool
	if err := conn.QueryRow(ctx, `SELECT count(DISTINCT colocationid) = 1 FROM pg_dist_partition
		WHERE logicalrelid IN ('messages'::regclass, 'partitions'::regclass)`).Scan(&colocated); err != nil {
		t.Fatal(err)
	}
	if !colocated {
		t.Error("messages and partitions are not co-located")
	}
	var argIndex int
	if err := conn.QueryRow(ctx, `SELECT d.distribution_argument_index FROM pg_dist_object d
		JOIN pg_dist_partition p ON p.colocationid = d.colocationid
		WHERE d.objid = 'push(bigint,text)'::regprocedure AND p.logicalrelid = 'partitions'::regclass`).Scan(&argIndex); err != nil {
		t.Fatalf("push is not a distributed function co-located with partitions: %v", err)
	}
	if argIndex != 0 {
		t.Errorf("push's distribution argument is $%d, want $1", argIndex+1)
	}

	// A call lands its row in the shard of its partition, on the worker that
	// holds that shard: read straight from the worker, not through the
	// coordinator.
	const partition = 7
	if _, err := conn.Exec(ctx, "SELECT push($1, 'hello')", partition); err != nil {
		t.Fatal(err)
	}
	var shard string
	var port int
	if err := conn.QueryRow(ctx, `SELECT shard_name, nodeport FROM citus_shards
		WHERE shardid = get_shard_id_for_distribution_column('messages', $1::bigint)`, partition).Scan(&shard, &port); err != nil {
		t.Fatal(err)
	}
	var worker *pgx.Conn
	for _, w := range c.Workers {
		if w.Port == port {
			worker = connect(t, w.URL(citustest.Database).String())
		}
	}
	if worker == nil {
		t.Fatalf("the shard of partition %d is on port %d, which is no worker's", partition, port)
	}
	var body string
	if err := worker.QueryRow(ctx, "SELECT body FROM "+pgx.Identifier{shard}.Sanitize()+" WHERE partition_id = $1", partition).Scan(&body); err != nil {
		t.Fatalf("the pushed row is not in shard %s on its worker: %v", shard, err)
	}
	if body != "hello" {
		t.Errorf("the shard holds %q, want hello", body)
	}
}

func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func execAll(t testing.TB, conn *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
