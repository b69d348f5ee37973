package citustest_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/migrate"
	"github.com/regent-mq/regent/test/citustest"
)

// On Citus a push, an ack of one partition and a state read are each one
// command, which the coordinator sends to the worker that holds the
// partition's shard: the call of queen.log_push_v2 or queen.ack_cursor,
// whose statements run there next to the rows, or the read itself. The
// coordinator runs none of their statements (what citus.log_remote_commands
// and citus.log_local_commands report).
func TestAPushAnAckAndAStateReadAreOneCommandToThePartitionsWorker(t *testing.T) {
	c := citustest.New(t, 2)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(c.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // the broker's calls and the logging settings on one session
	sent := record(cfg.ConnConfig)
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, `SET citus.log_remote_commands = on; SET citus.log_local_commands = on`)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := migrate.Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	// Partitions until both workers hold one.
	ports := map[uuid.UUID]int{}
	for seen := map[int]bool{}; len(seen) < 2; {
		if len(ports) == 64 {
			t.Fatalf("64 partitions all landed on one worker: %v", seen)
		}
		var pid uuid.UUID
		var port int
		err := pool.QueryRow(ctx, `SELECT r.partition_id, s.nodeport
			  FROM queen.resolve_partition_v2('default', 'q', $1, true, $2, $3) r,
			       citus_shards s
			 WHERE s.shardid = get_shard_id_for_distribution_column('queen.partitions', r.partition_id)`,
			uuid.NewString(), uuid.New(), uuid.New()).Scan(&pid, &port)
		if err != nil {
			t.Fatal(err)
		}
		ports[pid] = port
		seen[port] = true
	}

	d := db.New(pool)
	calls := []struct {
		name, sql string // sql: what the one command runs
		call      func(pid uuid.UUID) error
	}{
		{"push", "queen.log_push_v2(", func(pid uuid.UUID) error {
			now := time.Now()
			txid := uuid.NewString()
			_, dups, err := d.Push(ctx, db.Segments{
				Partitions: [][16]byte{pid}, Frames: []int32{1}, Bodies: [][]byte{{1}}, Checksums: []int64{0},
				TxIDs: []string{txid}, MinAt: []time.Time{now}, MaxAt: []time.Time{now},
				Dedups: []int32{1}, DedupTxIDs: []string{txid}, DedupMsgIDs: [][16]byte{uuid.New()},
			})
			if err == nil && dups != nil {
				err = fmt.Errorf("duplicates %v", dups)
			}
			return err
		}},
		{"ack", "queen.ack_cursor(", func(pid uuid.UUID) error {
			out, err := d.AckCursor(ctx, "default", []db.QueueAck{{PartitionID: pid, TransactionID: "none",
				Status: db.AckCompleted, Group: "g"}})
			if err == nil && (len(out) != 1 || out[0].Success) {
				err = fmt.Errorf("an ack of no message answered %+v", out)
			}
			return err
		}},
		{"state read", "FROM queen_streams.state_", func(pid uuid.UUID) error {
			return d.State(ctx, db.StateFilter{Tenant: "default", QueryID: uuid.New(), PartitionID: pid},
				func(string, []byte, time.Time) {})
		}},
	}
	for _, c := range calls {
		for pid, port := range ports {
			sent.take()
			if err := c.call(pid); err != nil {
				t.Fatalf("%s on partition %s: %v", c.name, pid, err)
			}
			got := sent.take()
			if len(got) != 1 || !strings.Contains(got[0].SQL, c.sql) || !strings.Contains(got[0].Where, ":"+strconv.Itoa(port)) {
				t.Errorf("%s of partition %s, on the worker at port %d, sent %q; want one command, %s…, to that worker",
					c.name, pid, port, got, c.sql)
			}
		}
	}
}
