package citustest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/regent-mq/regent/test/citustest"
)

// The facts about delegated functions that broker/pg/migrate/CITUS.md rests on,
// read from what the coordinator sends its workers (citus.log_remote_commands).
func TestDelegatedCallIsOneCommandToTheOwningWorker(t *testing.T) {
	c := citustest.New(t, 2)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(c.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	sent := record(cfg)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	execAll(t, conn, `SET citus.shard_count = 4`,
		`CREATE TABLE partitions (id bigint PRIMARY KEY, n bigint NOT NULL DEFAULT 0)`,
		`SELECT create_distributed_table('partitions', 'id')`,
		`INSERT INTO partitions (id) SELECT g FROM generate_series(1, 40) g`,
		`CREATE FUNCTION touch2(a bigint, b bigint) RETURNS void LANGUAGE plpgsql AS $$
		BEGIN
			UPDATE partitions SET n = n + 1 WHERE id = a;
			UPDATE partitions SET n = n + 1 WHERE id = b;
		END $$`,
		`SELECT create_distributed_function('touch2(bigint,bigint)', '$1', colocate_with => 'partitions')`,
		`SET citus.log_remote_commands = on`)

	type place struct{ shard, port int64 }
	places := map[int64]place{}
	for id := int64(1); id <= 40; id++ {
		var p place
		if err := conn.QueryRow(ctx, `SELECT shardid, nodeport FROM citus_shards
			WHERE shardid = get_shard_id_for_distribution_column('partitions', $1::bigint)`, id).Scan(&p.shard, &p.port); err != nil {
			t.Fatal(err)
		}
		places[id] = p
	}
	var sameShard, otherNode [2]int64
	for a := int64(1); a <= 40; a++ {
		for b := a + 1; b <= 40; b++ {
			if places[a].shard == places[b].shard {
				sameShard = [2]int64{a, b}
			}
			if places[a].port != places[b].port {
				otherNode = [2]int64{a, b}
			}
		}
	}
	if sameShard[0] == 0 || otherNode[0] == 0 {
		t.Fatalf("40 ids over 4 shards and 2 workers gave no pair on one shard or no pair on two nodes: %v", places)
	}

	call := func(tx bool, p [2]int64) []command {
		t.Helper()
		sent.take()
		if tx {
			err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "SELECT touch2($1, $2)", p[0], p[1])
				return err
			})
		} else {
			_, err = conn.Exec(ctx, "SELECT touch2($1, $2)", p[0], p[1])
		}
		if err != nil {
			t.Fatal(err)
		}
		return sent.take()
	}
	delegated := func(cmds []command) bool {
		return len(cmds) == 1 && strings.HasPrefix(cmds[0].SQL, "SELECT public.touch2(")
	}

	// In autocommit, the call goes whole to the worker of its first argument:
	// one command, even when the body writes a shard on the other worker
	// (that worker then routes the write itself).
	for _, p := range [][2]int64{sameShard, otherNode} {
		if cmds := call(false, p); !delegated(cmds) {
			t.Errorf("touch2%v in autocommit sent %q, want the one call", p, cmds)
		}
	}
	// Inside BEGIN … COMMIT it is not delegated: the coordinator runs the
	// body and sends each statement.
	if cmds := call(true, sameShard); delegated(cmds) {
		t.Errorf("touch2%v in a transaction was delegated: %q", sameShard, cmds)
	}

	want := map[int64]int64{}
	for _, p := range [][2]int64{sameShard, otherNode, sameShard} { // the calls above
		want[p[0]]++
		want[p[1]]++
	}
	for id, n := range want {
		var got int64
		if err := conn.QueryRow(ctx, "SELECT n FROM partitions WHERE id = $1", id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != n {
			t.Errorf("partition %d was updated %d times, want %d", id, got, n)
		}
	}
}
