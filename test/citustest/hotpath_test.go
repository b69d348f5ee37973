package citustest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/pg/migrate"
	"github.com/regent-mq/regent/test/citustest"
)

// On Citus each hot call is one command, which the coordinator sends to
// the worker that holds the partition's shard: the call of
// queen.log_push_v2, queen.pop_v2, queen_streams.cycle_v7 (and
// cycle_next_v2, a cycle with its next batch; a cycle's sink partition is
// created beside its source), queen.ack_cursor or queen.ack_v2, whose
// statements run there next to the rows; or state/get's read itself, a
// ripe read that marks the rows under the cycles' lock included; and a
// consumer's trace of a message (queen.trace_add), which a consumer may
// send for every message it handles. The coordinator runs none of their
// statements (what citus.log_remote_commands
// and citus.log_local_commands report).
func TestEveryHotCallIsOneCommandToThePartitionsWorker(t *testing.T) {
	c := citustest.New(t, 2, "shared_preload_libraries=citus,pg_stat_statements")
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
	d := db.New(pool)
	// A tenant with a grant and no maxStateRows: its cycles that add state
	// rows look the cap up, and find none.
	const tenant = "acme"
	if _, err := celldb.New(pool).ApplyQuota(ctx, celldb.Quota{Tenant: tenant, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	reg, err := d.Register(ctx, db.Registration{Tenant: tenant, Name: "sq", Source: "q", ConfigHash: "h"})
	if err != nil || reg.Outcome != db.Registered {
		t.Fatalf("register a query on q: %+v, %v", reg, err)
	}
	// Partitions until both workers hold one.
	ports := map[uuid.UUID]int{}
	var queueID uuid.UUID
	for seen := map[int]bool{}; len(seen) < 2; {
		if len(ports) == 64 {
			t.Fatalf("64 partitions all landed on one worker: %v", seen)
		}
		var pid uuid.UUID
		var port int
		err := pool.QueryRow(ctx, `SELECT r.queue_id, r.partition_id, s.nodeport
			  FROM queen.resolve_partition_v2($4, 'q', $1, true, $2, $3) r,
			       citus_shards s
			 WHERE s.shardid = get_shard_id_for_distribution_column('queen.partitions', r.partition_id)`,
			uuid.NewString(), uuid.New(), uuid.New(), tenant).Scan(&queueID, &pid, &port)
		if err != nil {
			t.Fatal(err)
		}
		ports[pid] = port
		seen[port] = true
	}

	// The query's leases on each partition: the pop takes the first, the
	// cycle with the next batch acks it and takes the second, which the
	// last cycle acks.
	var leases map[uuid.UUID][2]uuid.UUID
	newLeases := func() {
		leases = map[uuid.UUID][2]uuid.UUID{}
		for pid := range ports {
			leases[pid] = [2]uuid.UUID{uuid.New(), uuid.New()}
		}
	}
	newLeases()
	hot := d // the DB that the calls go through
	// Each source partition's sink partition, created beside it, as a
	// cycle's sink emits create theirs.
	sinks := map[uuid.UUID]uuid.UUID{}
	for pid := range ports {
		got, err := d.ResolvePartitions(ctx, []catalog.Target{{Tenant: tenant, Queue: "out", Partition: pid.String(), Near: pid}})
		if err != nil {
			t.Fatal(err)
		}
		sinks[pid] = got[0].ID
		var beside bool
		err = pool.QueryRow(ctx, `SELECT get_shard_id_for_distribution_column('queen.partitions', $1::uuid)
			= get_shard_id_for_distribution_column('queen.partitions', $2::uuid)`, got[0].ID, pid).Scan(&beside)
		if err != nil || !beside {
			t.Fatalf("sink partition %s was not created on the shard of its source %s (%v)", got[0].ID, pid, err)
		}
	}
	cycle := func(pid uuid.UUID, lease uuid.UUID, next *db.Next) error {
		var sink db.Segments
		if next == nil { // the other emits into its sink partition
			now, txid := time.Now(), uuid.NewString()
			sink = db.Segments{Partitions: [][16]byte{sinks[pid]}, Frames: []int32{1}, Bodies: [][]byte{{1}},
				Checksums: []int64{0}, TxIDs: []string{txid}, MinAt: []time.Time{now}, MaxAt: []time.Time{now},
				Dedups: []int32{1}, DedupTxIDs: []string{txid}, DedupMsgIDs: [][16]byte{uuid.New()}}
		}
		r, err := hot.RunCycle(ctx, db.Cycle{Tenant: tenant, QueryID: reg.QueryID, PartitionID: pid, Group: "streams.sq",
			Ops: db.StateOps{Applied: 1, UpsertKeys: []string{"w", uuid.NewString()}, // a row the cycle adds
				UpsertValues: []json.RawMessage{json.RawMessage(`{"windowEnd": 1}`), json.RawMessage(`{}`)}},
			Segments: sink, Ack: &db.Ack{LeaseID: &lease, OK: true, Release: true}, Next: next})
		switch {
		case err != nil:
			return err
		case !r.Committed() || r.AckCount != 1:
			return fmt.Errorf("the cycle answered %+v; want it committed, acking 1", r)
		case next != nil && r.Next == nil:
			return fmt.Errorf("the cycle claimed no next batch: %+v", r)
		}
		return nil
	}
	// ackNone acks, with status, a message the partition does not hold,
	// which the ack must answer as a failure.
	ackNone := func(ack func(context.Context, string, []db.QueueAck) ([]db.AckResult, error), pid uuid.UUID, status string) error {
		out, err := ack(ctx, tenant, []db.QueueAck{{PartitionID: pid, TransactionID: "none", Status: status, Group: "g"}})
		if err == nil && (len(out) != 1 || out[0].Success) {
			err = fmt.Errorf("an ack of no message answered %+v", out)
		}
		return err
	}
	pushed := map[uuid.UUID]string{} // a message of each partition, which the trace names
	calls := []struct {
		name, sql string // sql: what the one command runs
		call      func(pid uuid.UUID) error
	}{
		{"push", "queen.log_push_v2(", func(pid uuid.UUID) error {
			now := time.Now()
			txids := []string{uuid.NewString(), uuid.NewString()}
			_, dups, err := hot.Push(ctx, db.Segments{
				Partitions: [][16]byte{pid}, Frames: []int32{2}, Bodies: [][]byte{{1}}, Checksums: []int64{0},
				TxIDs: txids, MinAt: []time.Time{now}, MaxAt: []time.Time{now},
				Dedups: []int32{2}, DedupTxIDs: txids, DedupMsgIDs: [][16]byte{uuid.New(), uuid.New()},
			})
			if err == nil && dups != nil {
				err = fmt.Errorf("duplicates %v", dups)
			}
			pushed[pid] = txids[0]
			return err
		}},
		{"trace", "queen.trace_add(", func(pid uuid.UUID) error {
			found, err := hot.AddTrace(ctx, tenant, db.NewTrace{ID: uuid.New(), PartitionID: pid, TransactionID: pushed[pid],
				ConsumerGroup: "g", EventType: "info", Data: json.RawMessage(`{"step": 1}`), Names: []string{"n"}, Worker: "w"})
			if err == nil && !found {
				err = fmt.Errorf("the trace found no message")
			}
			return err
		}},
		{"pop", "queen.pop_v2(", func(pid uuid.UUID) error {
			claims, _, _, err := hot.Pop(ctx, &db.PopCall{Tenant: tenant, Queue: "q", QueueID: queueID, Group: "streams.sq",
				Partitions: 1, Batch: 1, LeaseID: leases[pid][0], SubStart: "all", MaxBytes: 1 << 20}, []uuid.UUID{pid})
			if err == nil && (len(claims) != 1 || claims[0].BatchEnd-claims[0].BatchStart != 1) {
				err = fmt.Errorf("the pop claimed %+v; want one message", claims)
			}
			return err
		}},
		{"cycle with its next batch", "queen_streams.cycle_next_v2(", func(pid uuid.UUID) error {
			return cycle(pid, leases[pid][0], &db.Next{LeaseID: leases[pid][1], Batch: 1, MaxBytes: 1 << 20})
		}},
		{"cycle that emits", "queen_streams.cycle_v7(", func(pid uuid.UUID) error {
			return cycle(pid, leases[pid][1], nil)
		}},
		{"ripe read", "FROM queen_streams.state", func(pid uuid.UUID) error {
			n, end := 0, 2.0
			err := hot.State(ctx, db.StateFilter{QueryID: reg.QueryID, PartitionID: pid,
				RipeAtOrBefore: &end, Mark: true}, func(string, []byte, time.Time) { n++ })
			if err == nil && n != 1 {
				err = fmt.Errorf("the ripe read read %d rows; want the cycles' one", n)
			}
			return err
		}},
		{"ack of any status", "queen.ack_v2(", func(pid uuid.UUID) error {
			return ackNone(hot.Ack, pid, db.AckFailed)
		}},
		{"ack", "queen.ack_cursor(", func(pid uuid.UUID) error {
			return ackNone(hot.AckCursor, pid, db.AckCompleted)
		}},
		{"state read", "FROM queen_streams.state", func(pid uuid.UUID) error {
			return hot.State(ctx, db.StateFilter{QueryID: uuid.New(), PartitionID: pid},
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

	// With --citus-route the broker sends each call straight to that
	// worker, and the coordinator and the other worker run no statement on
	// Regent's tables (pg_stat_statements on each node counts the
	// statements that clients send it, Citus's own connections among
	// them): not even for the cycle's look-up of the tenant's
	// maxStateRows, in quota, a reference table.
	routed, err := db.Open(ctx, c.URL().String(), db.Options{MaxConns: 2, Route: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(routed.Close)
	if _, err := routed.RefreshNodes(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE EXTENSION pg_stat_statements`); err != nil {
		t.Fatal(err)
	}
	nodes := map[int]*pgx.Conn{}
	for _, n := range c.Nodes() {
		nodes[n.Port] = connect(t, n.URL(citustest.Database).String())
	}
	// statements counts, on each node, the statements clients sent it that
	// name sql.
	statements := func(sql string) map[int]int64 {
		t.Helper()
		out := map[int]int64{}
		for port, conn := range nodes {
			var n int64
			if err := conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements
				WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND strpos(query, $1) > 0`,
				sql).Scan(&n); err != nil {
				t.Fatal(err)
			}
			out[port] = n
		}
		return out
	}
	// regent counts the statements on Regent's tables, and Citus's remote
	// locks of their shards: a row lock of a reference table, or a write
	// of one, from a node other than the first worker, takes the table's
	// lock on the first worker (lock_shard_resources).
	regent := func() map[int]int64 {
		out := statements("queen")
		for port, n := range statements("lock_shard_resources") {
			out[port] += n
		}
		return out
	}
	hot = routed
	newLeases()
	for _, c := range calls {
		for pid, port := range ports {
			before, beforeAny := statements(c.sql), regent()
			if err := c.call(pid); err != nil {
				t.Fatalf("routed, %s on partition %s: %v", c.name, pid, err)
			}
			after, afterAny := statements(c.sql), regent()
			for node := range nodes {
				want := int64(0)
				if node == port {
					want = 1
				} else if got := afterAny[node] - beforeAny[node]; got != 0 {
					t.Errorf("routed, %s of partition %s, on the worker at port %d: the node at port %d ran %d statements on Regent's tables or their shards' locks; want none",
						c.name, pid, port, node, got)
				}
				if got := after[node] - before[node]; got != want {
					t.Errorf("routed, %s of partition %s, on the worker at port %d: the node at port %d ran %d statements %s…; want %d",
						c.name, pid, port, node, got, c.sql, want)
				}
			}
		}
	}
}
