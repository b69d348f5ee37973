// Package citusops tests what the README and broker/pg/migrate/CITUS.md
// tell an operator who runs Regent on Citus: that migrate refuses a
// worker's URL, and the upgrade of a plain Regent database to Citus by a
// dump and restore (CITUS.md, "Upgrading a plain database to Citus"):
// pg_dump of the plain database, pg_restore on a coordinator whose database
// has the citus extension, `broker migrate`, which distributes the tables,
// and the coordinator's local copies truncated.
package citusops

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/pg/migrate"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/citustest"
	"github.com/regent-mq/regent/test/pgtest"
)

// What a plain database held (messages, a consumer group's acks, a streams
// query's state and sink) is served the same from Citus after the dump and
// restore, and the restored database takes new pushes.
func TestAPlainDatabaseDumpedAndRestoredOnCitusServesItsMessagesCursorsAndState(t *testing.T) {
	ctx := context.Background()
	plain := brokertest.StartOn(t, pgtest.Own(t).URL("postgres").String())
	for _, p := range []string{"a", "b", "c"} {
		plain.PushN(t, "orders", p, 1, 3)
	}
	// Group g1 consumed partition a.
	popped := plain.Pop(t, "/api/v1/pop/queue/orders/partition/a?batch=10&consumerGroup=g1")
	acks := []map[string]any{}
	for _, m := range popped.Messages {
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "completed"})
	}
	plain.Call(t, http.StatusOK, "POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks, "consumerGroup": "g1"})
	// A consumer's trace of one of them, named "new", and a second name of
	// it as a broker of the previous release wrote names, without their
	// partition id (migration 0019): no typed helper writes another
	// release's rows.
	var trace struct {
		ID string `json:"traceId"`
	}
	plain.Call(t, http.StatusCreated, "POST", "/api/v1/traces", map[string]any{"transactionId": popped.Messages[0].TransactionID,
		"partitionId": popped.Messages[0].PartitionID, "data": 1, "traceNames": "new"}).JSON(t, &trace)
	if _, err := plain.Pool.Exec(ctx, `INSERT INTO queen.trace_names (tenant, name, trace_id) VALUES ($1, 'old', $2)`,
		plain.Tenant, trace.ID); err != nil {
		t.Fatal(err)
	}
	// A streams query folded partition b: its state, its sink, its ack.
	var reg struct {
		QueryID string `json:"query_id"`
	}
	plain.Call(t, http.StatusOK, "POST", "/streams/v1/queries",
		map[string]any{"name": "up.count", "source_queue": "orders", "sink_queue": "orders.out", "config_hash": "v1"}).JSON(t, &reg)
	b := plain.Pop(t, "/api/v1/pop/queue/orders/partition/b?batch=10&consumerGroup=streams.up.count")
	plain.Call(t, http.StatusOK, "POST", "/streams/v1/cycle", map[string]any{
		"query_id": reg.QueryID, "partition_id": b.PartitionID, "consumer_group": "streams.up.count",
		"state_ops":  []map[string]any{{"type": "upsert", "key": "total", "value": map[string]any{"count": 3}}},
		"push_items": []map[string]any{{"queue": "orders.out", "partition": "b", "payload": map[string]any{"n": 3}}},
		"ack":        map[string]any{"leaseId": b.LeaseID, "status": "completed", "count": 3},
	})
	plain.Stop()

	// The procedure, as CITUS.md writes it.
	bin, err := pgtest.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), "regent.dump")
	run(t, filepath.Join(bin, "pg_dump"), "-Fc", "-f", dump, plain.DatabaseURL)
	c := citustest.New(t, 2)
	coordinator := c.URL().String()
	run(t, filepath.Join(bin, "pg_restore"), "--no-owner", "--exit-on-error", "-d", coordinator, dump)
	pool, err := pgxpool.New(ctx, coordinator)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := migrate.Up(ctx, pool, nil); err != nil { // what `broker migrate` runs
		t.Fatalf("migrate the restored database on Citus: %v", err)
	}
	if _, err := pool.Exec(ctx, `SELECT truncate_local_data_after_distributing_table(logicalrelid) FROM pg_dist_partition`); err != nil {
		t.Fatalf("truncate the coordinator's local copies: %v", err)
	}

	citus := brokertest.StartOn(t, coordinator)
	if n := citus.Count(t, `SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = 'queen.partitions'::regclass`); n != 1 {
		t.Fatalf("queen.partitions is not distributed after the migration (%d)", n)
	}
	if got := citus.Pop(t, "/api/v1/pop/queue/orders/partition/a?batch=10&consumerGroup=g1").Ns(); got != nil {
		t.Errorf("g1 popped %v of partition a again, which it acked before the upgrade", got)
	}
	if got := citus.Pop(t, "/api/v1/pop/queue/orders/partition/b?batch=10&consumerGroup=streams.up.count").Ns(); got != nil {
		t.Errorf("the query's group popped %v of partition b again, which its cycle acked", got)
	}
	var ns []int
	for _, m := range citus.PopAll(t, "/api/v1/pop/queue/orders?batch=10&consumerGroup=g2&autoAck=true") {
		ns = append(ns, m.N())
	}
	if slices.Sort(ns); !slices.Equal(ns, []int{1, 1, 1, 2, 2, 2, 3, 3, 3}) {
		t.Errorf("a new group popped %v, want the 9 messages of the plain database", ns)
	}
	var state struct {
		Rows []struct {
			Key   string         `json:"key"`
			Value map[string]any `json:"value"`
		} `json:"rows"`
	}
	citus.Call(t, http.StatusOK, "POST", "/streams/v1/state/get",
		map[string]any{"query_id": reg.QueryID, "partition_id": b.PartitionID}).JSON(t, &state)
	if len(state.Rows) != 1 || state.Rows[0].Key != "total" || state.Rows[0].Value["count"] != 3.0 {
		t.Errorf("the query's state on Citus is %+v, want total {count: 3}", state.Rows)
	}
	if got := citus.Pop(t, "/api/v1/pop/queue/orders.out?autoAck=true").Ns(); !slices.Equal(got, []int{3}) {
		t.Errorf("the sink popped %v, want the cycle's one message", got)
	}
	var named struct {
		Traces []struct {
			ID    string   `json:"id"`
			Names []string `json:"trace_names"`
		} `json:"traces"`
	}
	citus.Call(t, http.StatusOK, "GET", "/api/v1/traces/by-name/old", nil).JSON(t, &named)
	if len(named.Traces) != 1 || named.Traces[0].ID != trace.ID || !slices.Equal(named.Traces[0].Names, []string{"new", "old"}) {
		t.Errorf("the trace by its name of the previous release is %+v on Citus, want trace %s named [new old]", named.Traces, trace.ID)
	}
	citus.PushN(t, "orders", "a", 4, 1)
	if got := citus.Pop(t, "/api/v1/pop/queue/orders/partition/a?batch=10&consumerGroup=g1&autoAck=true").Ns(); !slices.Equal(got, []int{4}) {
		t.Errorf("g1 popped %v after a push on Citus, want [4]", got)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(name), err, out)
	}
}
