package celldb_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/test/brokertest"
)

// The source's partitions in these tests.
var parts = []string{"p0", "p1", "p2", "p3"}

// pushParts pushes n messages to each partition of parts.
func pushParts(t *testing.T, b *brokertest.Broker, n int) {
	t.Helper()
	var items []map[string]any
	for _, p := range parts {
		for i := range n {
			items = append(items, map[string]any{"queue": "src", "partition": p, "payload": map[string]any{"n": i}})
		}
	}
	if r := b.Do(t, "POST", "/api/v1/push", brokertest.Mint(t, auth.DefaultTenant, auth.ReadWrite), map[string]any{"items": items}); r.Status != http.StatusCreated {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
}

type leased struct {
	Lease     string
	Partition string
	N         int
}

// popPart leases up to batch messages of the partition for the query's
// group; ok is false when it has none.
func popPart(t *testing.T, b *brokertest.Broker, part string, batch int) (l leased, ok bool) {
	r := b.Do(t, "GET", fmt.Sprintf("/api/v1/pop/queue/src/partition/%s?batch=%d&consumerGroup=streams.q", part, batch),
		brokertest.Mint(t, auth.DefaultTenant, auth.ReadWrite), nil)
	if r.Status == http.StatusNoContent {
		return l, false
	}
	var p struct {
		LeaseID  string `json:"leaseId"`
		Messages []struct {
			PartitionID string `json:"partitionId"`
		} `json:"messages"`
	}
	if r.Status != http.StatusOK {
		t.Errorf("pop %s: %d %s", part, r.Status, r.Body)
		return l, false
	}
	r.JSON(t, &p)
	return leased{Lease: p.LeaseID, Partition: p.Messages[0].PartitionID, N: len(p.Messages)}, true
}

// cycleCount commits one fold of a counting worker: the partition's state
// row "count" grows by the batch's size, and the batch is acked, in one
// cycle. It returns the cycle's answer.
func cycleCount(t *testing.T, b *brokertest.Broker, id string, l leased) map[string]any {
	tok := brokertest.Mint(t, auth.DefaultTenant, auth.ReadWrite)
	r := b.Do(t, "POST", "/streams/v1/state/get", tok, map[string]any{"query_id": id, "partition_id": l.Partition, "keys": []string{"count"}})
	var st struct {
		Rows []struct {
			Value float64 `json:"value"`
		} `json:"rows"`
	}
	r.JSON(t, &st)
	count := 0.0
	if len(st.Rows) == 1 {
		count = st.Rows[0].Value
	}
	return b.Do(t, "POST", "/streams/v1/cycle", tok, map[string]any{
		"query_id": id, "partition_id": l.Partition, "consumer_group": "streams.q",
		"state_ops": []map[string]any{{"type": "upsert", "key": "count", "value": count + float64(l.N)}},
		"ack":       map[string]any{"leaseId": l.Lease, "status": "completed", "count": l.N},
	}).Map(t)
}

// fold runs the counting worker on part until the partition is drained or
// stop is closed.
func fold(t *testing.T, b *brokertest.Broker, id, part string, batch int, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		l, ok := popPart(t, b, part, batch)
		if !ok {
			return
		}
		if a := cycleCount(t, b, id, l); a["success"] != true {
			t.Errorf("cycle on %s: %v", part, a)
			return
		}
	}
}

// shards returns, per source partition id, the "count" state row and the
// group's committed offset, as the savepoint holds them (savepoint set) or
// as they are now (savepoint empty).
func shards(t *testing.T, b *brokertest.Broker, id, savepoint string) map[string][2]int64 {
	t.Helper()
	q := `SELECT p.id::text, coalesce((SELECT (s.value #>> '{}')::bigint FROM queen_streams.state s
	                     WHERE s.query_id = $1 AND s.partition_id = p.id AND s.key = 'count'), -1),
	             coalesce((SELECT c.committed FROM queen.cursors c WHERE c.partition_id = p.id AND c.consumer_group = 'streams.q'), -1)
	        FROM queen.partitions p JOIN queen.queues qu ON qu.id = p.queue_id WHERE qu.name = 'src'`
	args := []any{id}
	if savepoint != "" {
		q = `SELECT p.id::text, coalesce((SELECT (s.value #>> '{}')::bigint FROM queen_streams.savepoint_state s
		                     WHERE s.query_id = $1 AND s.name = $2 AND s.partition_id = p.id AND s.key = 'count'), -1),
		             coalesce((SELECT c.committed FROM queen_streams.savepoint_cursors c
		                     WHERE c.query_id = $1 AND c.name = $2 AND c.partition_id = p.id), -1)
		        FROM queen.partitions p JOIN queen.queues qu ON qu.id = p.queue_id WHERE qu.name = 'src'`
		args = append(args, savepoint)
	}
	rows, err := b.Pool.Query(ctx, q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][2]int64{}
	for rows.Next() {
		var p string
		var c [2]int64
		if err := rows.Scan(&p, &c[0], &c[1]); err != nil {
			t.Fatal(err)
		}
		out[p] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The counting worker keeps, on every partition, its state row "count"
// equal to the group's committed offset: both move in one cycle. A
// savepoint with a cycle between its copy of the state and its copy of the
// cursors would break that.
func TestASavepointTakenWhileCyclesRunFallsBetweenCycles(t *testing.T) {
	b, cell, id := setup(t)
	pushParts(t, b, 400)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		go func() { defer wg.Done(); fold(t, b, id, p, 3, stop) }()
	}
	taken := 0
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("sp%d", i)
		sp, existed, err := cell.TakeSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", name, nil)
		if err != nil || existed {
			t.Fatalf("take %s = %+v, existed %v, %v", name, sp, existed, err)
		}
		mid := 0
		held := shards(t, b, id, name)
		for p, c := range held {
			if c[0] != c[1] && !(c[0] == -1 && c[1] <= 0) {
				t.Errorf("savepoint %s holds count %d and committed offset %d on partition %s: a cycle fell between them", name, c[0], c[1], p)
			}
			if c[1] > 0 && c[1] < 400 {
				mid++
			}
		}
		if mid > 0 {
			taken++
		}
		// The next savepoint once a cycle has run since this one (or the
		// folds are done), so that each falls between other cycles.
		brokertest.Eventually(t, 30*time.Second, func() error {
			done := 0
			for p, c := range shards(t, b, id, "") {
				if c[1] != held[p][1] {
					return nil
				}
				if c[1] == 400 {
					done++
				}
			}
			if done == len(parts) {
				return nil
			}
			return fmt.Errorf("no cycle since savepoint %s", name)
		})
	}
	close(stop)
	wg.Wait()
	if taken < 3 {
		t.Fatalf("only %d of the savepoints were taken while partitions were half folded: the test proved nothing", taken)
	}
	t.Logf("%d of 20 savepoints taken mid-fold", taken)
}

func TestARestoreBringsBackExactlyTheStateRowsAndCursorsAndTheHash(t *testing.T) {
	b, cell, id := setup(t)
	pushParts(t, b, 20)
	for _, p := range parts[:3] { // p3 is not reached before the savepoint
		l, _ := popPart(t, b, p, 5)
		cycleCount(t, b, id, l)
	}
	execSQL(t, b, `INSERT INTO queen_streams.state (query_id, partition_id, key, value)
		SELECT $1, p.id, 'w' || g, jsonb_build_object('acc', g) FROM queen.partitions p, generate_series(1, 10) g
		 WHERE p.name = 'p0'`, id)
	pipeline := `{"filter":"true"}`
	sp, _, err := cell.TakeSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", "before", &pipeline)
	if err != nil {
		t.Fatal(err)
	}
	if sp.StateRows != 13 || sp.Cursors != 3 || sp.ConfigHash != "h1" {
		t.Fatalf("savepoint %+v, want 13 state rows, 3 cursors and hash h1", sp)
	}
	const snapshot = `SELECT string_agg(partition_id || '/' || key || '=' || value::text || '@' || updated_at::text, ',' ORDER BY partition_id, key)
		FROM queen_streams.state WHERE query_id = $1`
	var wantState string
	if err := b.Pool.QueryRow(ctx, snapshot, id).Scan(&wantState); err != nil {
		t.Fatal(err)
	}
	wantShards := shards(t, b, id, "")

	// After the savepoint: more folds on every partition, a new key, a
	// deleted one, a new hash with a reset, and a worker holding a lease.
	for _, p := range parts {
		l, _ := popPart(t, b, p, 5)
		cycleCount(t, b, id, l)
	}
	execSQL(t, b, `DELETE FROM queen_streams.state WHERE query_id = $1 AND key = 'w1'`, id)
	register(t, b, "h2", true)
	held, _ := popPart(t, b, "p1", 5)

	rs, err := cell.RestoreSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", "before", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if rs.Already || rs.StateRows != 13 || rs.Cursors != 3 || rs.ConfigHash != "h1" || rs.Pipeline == nil || *rs.Pipeline != pipeline {
		t.Fatalf("restore %+v, want 13 rows, 3 cursors, hash h1 and the pipeline", rs)
	}
	var gotState string
	if err := b.Pool.QueryRow(ctx, snapshot, id).Scan(&gotState); err != nil {
		t.Fatal(err)
	}
	if gotState != wantState {
		t.Fatalf("restored state\n%s\nwant\n%s", gotState, wantState)
	}
	for p, c := range shards(t, b, id, "") {
		if c != wantShards[p] {
			t.Errorf("partition %s: restored count and cursor %v, want %v", p, c, wantShards[p])
		}
	}
	if n := b.Count(t, `SELECT count(*) FROM queen.cursors WHERE consumer_group = 'streams.q' AND lease_id IS NOT NULL`); n != 0 {
		t.Fatalf("%d leases of the group survived the restore", n)
	}
	if n := b.Count(t, `SELECT sum(row_count)::int FROM queen_streams.state_rows WHERE query_id = $1`, id); n != 13 {
		t.Fatalf("the state row count says %d after the restore, want 13", n)
	}
	if a := cycleCount(t, b, id, held); a["success"] != false {
		t.Fatalf("a cycle of a batch leased before the restore answered %v, want refused for its lease", a)
	}
	// The registration holds the savepoint's hash again: h1 registers
	// without a conflict, h2 conflicts.
	register(t, b, "h1", false)
	if r := b.Do(t, "POST", "/streams/v1/queries", brokertest.Mint(t, auth.DefaultTenant, auth.ReadWrite),
		map[string]any{"name": "q", "source_queue": "src", "config_hash": "h2"}); r.Status != http.StatusConflict {
		t.Fatalf("registering the pre-restore hash answered %d, want 409", r.Status)
	}

	// Folding resumes from the savepoint: every message counted once.
	for _, p := range parts {
		fold(t, b, id, p, 7, nil)
	}
	for p, c := range shards(t, b, id, "") {
		if c[0] != 20 || c[1] != 20 {
			t.Errorf("partition %s after the restore and a drain: count %d, committed %d; want 20 and 20", p, c[0], c[1])
		}
	}
}

func TestARestoreRaisesTheResetGenerationAndHappensOncePerToken(t *testing.T) {
	b, cell, id := setup(t)
	pushParts(t, b, 10)
	if _, _, err := cell.TakeSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", "empty", nil); err != nil {
		t.Fatal(err)
	}
	g := generation(t, cell, auth.DefaultTenant, "q")
	first, err := cell.RestoreSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", "empty", "r1")
	if err != nil || first.Already {
		t.Fatalf("restore = %+v, %v", first, err)
	}
	if after := generation(t, cell, auth.DefaultTenant, "q"); after != g+1 {
		t.Fatalf("reset generation %d after a restore, want %d", after, g+1)
	}
	fold(t, b, id, "p0", 10, nil)
	again, err := cell.RestoreSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", "empty", "r1")
	if err != nil || !again.Already || !again.At.Equal(first.At) {
		t.Fatalf("the same token again = %+v, %v; want the first restore, already done", again, err)
	}
	if c := shards(t, b, id, ""); len(c) != 4 {
		t.Fatalf("shards %v", c)
	}
	if n := b.Count(t, `SELECT count(*) FROM queen_streams.state WHERE query_id = $1`, id); n != 1 {
		t.Fatalf("%d state rows after a repeated token, want the fold's 1: it restored again", n)
	}
	if next, err := cell.RestoreSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", "empty", "r2"); err != nil || next.Already {
		t.Fatalf("a new token = %+v, %v; want a restore", next, err)
	}
	if n := b.Count(t, `SELECT count(*) FROM queen_streams.state WHERE query_id = $1`, id); n != 0 {
		t.Fatalf("%d state rows after restoring an empty savepoint", n)
	}
}

func TestASavepointNameIsTakenOnce(t *testing.T) {
	b, cell, id := setup(t)
	first, existed, err := cell.TakeSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", "a", nil)
	if err != nil || existed {
		t.Fatalf("take = %+v, %v, %v", first, existed, err)
	}
	execSQL(t, b, `INSERT INTO queen_streams.state (query_id, partition_id, key, value) VALUES ($1, gen_random_uuid(), 'k', '{}')`, id)
	again, existed, err := cell.TakeSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", "a", nil)
	if err != nil || !existed || again != first {
		t.Fatalf("the same name again = %+v, existed %v, %v; want the first savepoint %+v", again, existed, err, first)
	}
}

func TestSavepointsAreListedNewestFirstAndPrunedToKeep(t *testing.T) {
	_, cell, _ := setup(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		if _, _, err := cell.TakeSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", n, nil); err != nil {
			t.Fatal(err)
		}
	}
	dropped, err := cell.PruneSavepoints(ctx, auth.DefaultTenant, "q", 2)
	if err != nil || dropped != 2 {
		t.Fatalf("prune to 2 = %d, %v; want 2 dropped", dropped, err)
	}
	list, err := cell.Savepoints(ctx, auth.DefaultTenant, "q")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "d" || list[1].Name != "c" {
		t.Fatalf("savepoints after pruning to 2: %+v, want d then c", list)
	}
	if _, err := cell.RestoreSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", "a", "r"); !errors.Is(err, celldb.ErrNoSavepoint) {
		t.Fatalf("restoring a pruned savepoint = %v, want ErrNoSavepoint", err)
	}
}

func TestSavepointsOfAnUnknownQueryAreErrNoQuery(t *testing.T) {
	_, cell, _ := setup(t)
	if _, _, err := cell.TakeSavepoint(ctx, auth.DefaultTenant, "absent", "streams.absent", "a", nil); !errors.Is(err, celldb.ErrNoQuery) {
		t.Fatalf("take = %v, want ErrNoQuery", err)
	}
	if _, err := cell.RestoreSavepoint(ctx, auth.DefaultTenant, "absent", "streams.absent", "a", "r"); !errors.Is(err, celldb.ErrNoQuery) {
		t.Fatalf("restore = %v, want ErrNoQuery", err)
	}
	// Another tenant's query of the same name is not this tenant's.
	if _, _, err := cell.TakeSavepoint(ctx, "acme", "q", "streams.q", "a", nil); !errors.Is(err, celldb.ErrNoQuery) {
		t.Fatalf("take as another tenant = %v, want ErrNoQuery", err)
	}
}

// Not a timed assertion: the figures for the note.
func TestSavepointAndRestoreOf100000StateRows(t *testing.T) {
	b, cell, id := setup(t)
	pushParts(t, b, 1)
	execSQL(t, b, `INSERT INTO queen_streams.state (query_id, partition_id, key, value)
		SELECT $1, p.id, 'tumb:60' || chr(31) || g, jsonb_build_object('count', g, 'sum', g * 2, 'windowEnd', 1700000000000 + g)
		  FROM queen.partitions p, generate_series(1, 25000) g`, id)
	start := time.Now()
	sp, _, err := cell.TakeSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", "big", nil)
	took := time.Since(start)
	if err != nil || sp.StateRows != 100000 {
		t.Fatalf("take = %+v, %v; want 100000 rows", sp, err)
	}
	start = time.Now()
	rs, err := cell.RestoreSavepoint(ctx, auth.DefaultTenant, "q", "streams.q", "big", "r")
	restored := time.Since(start)
	if err != nil || rs.StateRows != 100000 {
		t.Fatalf("restore = %+v, %v; want 100000 rows", rs, err)
	}
	t.Logf("100,000 state rows over 4 partitions: savepoint %v, restore %v", took.Round(time.Millisecond), restored.Round(time.Millisecond))
}

func TestLeasesCountsTheGroupsLiveLeasesOnTheSource(t *testing.T) {
	b, cell, id := setup(t)
	pushParts(t, b, 5)
	count := func() int32 {
		t.Helper()
		n, err := cell.Leases(ctx, auth.DefaultTenant, "q", "streams.q")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("%d leases before any pop", n)
	}
	l0, _ := popPart(t, b, "p0", 5)
	popPart(t, b, "p1", 5)
	if n := count(); n != 2 {
		t.Fatalf("%d leases after two pops, want 2", n)
	}
	cycleCount(t, b, id, l0)
	execSQL(t, b, `UPDATE queen.cursors SET lease_expires_at = now() - interval '1 second' WHERE consumer_group = 'streams.q' AND lease_id IS NOT NULL`)
	if n := count(); n != 0 {
		t.Fatalf("%d leases after one cycle released its lease and the other expired, want 0", n)
	}
}
