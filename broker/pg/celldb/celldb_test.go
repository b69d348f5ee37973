package celldb_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

// The cell's tests run against a real broker and its database.
func TestMain(m *testing.M) { pgtest.Main(m) }

var ctx = context.Background()

// setup starts a broker with the default tenant's query "q" registered,
// and returns the cell database of that broker and the query's id. Each
// test has a broker and a database of its own, so they run in parallel.
func setup(t *testing.T) (*brokertest.Broker, *celldb.DB, string) {
	t.Helper()
	t.Parallel()
	b := brokertest.Start(t, brokertest.WithJWT(false))
	id := register(t, b, "h1", false)
	return b, celldb.New(b.Pool), id
}

func register(t *testing.T, b *brokertest.Broker, hash string, reset bool) string {
	t.Helper()
	r := b.Do(t, "POST", "/streams/v1/queries", brokertest.Mint(t, auth.DefaultTenant, auth.ReadWrite),
		map[string]any{"name": "q", "source_queue": "src", "config_hash": hash, "reset": reset})
	if r.Status != http.StatusOK {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	return r.Map(t)["query_id"].(string)
}

func execSQL(t *testing.T, b *brokertest.Broker, sql string, args ...any) {
	t.Helper()
	if _, err := b.Pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func generation(t *testing.T, cell *celldb.DB, tenant, name string) int64 {
	t.Helper()
	g, err := cell.ResetGeneration(ctx, tenant, name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestOnlyAResetRegistrationRaisesTheResetGeneration(t *testing.T) {
	b, cell, _ := setup(t)
	if g := generation(t, cell, auth.DefaultTenant, "q"); g != 0 {
		t.Fatalf("a new query has reset generation %d, want 0", g)
	}
	register(t, b, "h1", false)
	if g := generation(t, cell, auth.DefaultTenant, "q"); g != 0 {
		t.Fatalf("a registration without reset raised the generation to %d", g)
	}
	register(t, b, "h2", true)
	register(t, b, "h2", true)
	if g := generation(t, cell, auth.DefaultTenant, "q"); g != 2 {
		t.Fatalf("reset generation %d after two resets, want 2", g)
	}
}

func TestResetGenerationOfAnUnknownQueryIsErrNoQuery(t *testing.T) {
	_, cell, _ := setup(t)
	if _, err := cell.ResetGeneration(ctx, auth.DefaultTenant, "absent"); !errors.Is(err, celldb.ErrNoQuery) {
		t.Fatalf("err = %v, want ErrNoQuery", err)
	}
}

func TestResetGenerationIsScopedToItsTenant(t *testing.T) {
	_, cell, _ := setup(t)
	if _, err := cell.ResetGeneration(ctx, "other", "q"); !errors.Is(err, celldb.ErrNoQuery) {
		t.Fatalf("err = %v for another tenant's query of the same name, want ErrNoQuery", err)
	}
}

func TestProgressCountsTheQuerysStateRows(t *testing.T) {
	b, cell, id := setup(t)
	execSQL(t, b, `INSERT INTO queen_streams.state (query_id, partition_id, key, value) VALUES ($1, gen_random_uuid(), 'k', '{}')`, id)
	p, err := cell.Progress(ctx, auth.DefaultTenant, "q", "streams.q", "src")
	if err != nil {
		t.Fatal(err)
	}
	if p.StateRows != 1 || p.Lag != 0 || p.LastCycle == nil {
		t.Fatalf("progress %+v, want one state row, no lag, and the row's time", p)
	}
}

func TestDeleteQueryReportsWhetherThereWasOne(t *testing.T) {
	_, cell, _ := setup(t)
	for i, want := range []bool{true, false} {
		found, err := cell.DeleteQuery(ctx, auth.DefaultTenant, "q")
		if err != nil || found != want {
			t.Fatalf("delete #%d = %v, %v; want %v", i+1, found, err, want)
		}
	}
	if _, err := cell.Progress(ctx, auth.DefaultTenant, "q", "streams.q", "src"); !errors.Is(err, celldb.ErrNoQuery) {
		t.Fatalf("progress after the delete: %v, want ErrNoQuery", err)
	}
}

func TestDeleteQuotaRemovesTheGrantAndLeavesTheQueries(t *testing.T) {
	b, cell, _ := setup(t)
	execSQL(t, b, `INSERT INTO queen_streams.queries (id, tenant, name, source_queue, config_hash) VALUES (gen_random_uuid(), 'acme', 'a', 's', 'h')`)
	if _, err := cell.ApplyQuota(ctx, celldb.Quota{Tenant: "acme", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if err := cell.DeleteQuota(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	var grants int
	if err := b.Pool.QueryRow(ctx, `SELECT count(*) FROM queen_streams.quota WHERE tenant = 'acme'`).Scan(&grants); err != nil {
		t.Fatal(err)
	}
	if n, err := cell.CountQueries(ctx, "acme"); grants != 0 || err != nil || n != 1 {
		t.Fatalf("%d grants and %d queries (%v) after the delete, want 0 and 1", grants, n, err)
	}
}

func TestProgressOfAnUnknownQueryIsErrNoQuery(t *testing.T) {
	_, cell, _ := setup(t)
	if _, err := cell.Progress(ctx, auth.DefaultTenant, "absent", "streams.absent", "src"); !errors.Is(err, celldb.ErrNoQuery) {
		t.Fatalf("err = %v, want ErrNoQuery", err)
	}
}

func TestLagCountsEveryPartitionFromTheGroupsCursor(t *testing.T) {
	b, cell, _ := setup(t)
	execSQL(t, b, `INSERT INTO queen.queues (id, tenant, name) VALUES ('0193f0c4-0000-7000-8000-000000000001', 'default', 'src')`)
	execSQL(t, b, `INSERT INTO queen.partitions (id, queue_id, name, next_offset) VALUES
		('0193f0c4-0000-7000-8000-000000000002', '0193f0c4-0000-7000-8000-000000000001', 'a', 10),
		('0193f0c4-0000-7000-8000-000000000003', '0193f0c4-0000-7000-8000-000000000001', 'b', 5)`)
	execSQL(t, b, `INSERT INTO queen.cursors (partition_id, consumer_group, committed, last_consumed_at) VALUES
		('0193f0c4-0000-7000-8000-000000000002', 'streams.q', 4, now()),
		('0193f0c4-0000-7000-8000-000000000003', 'other-group', 5, now())`)
	p, err := cell.Progress(ctx, auth.DefaultTenant, "q", "streams.q", "src")
	if err != nil {
		t.Fatal(err)
	}
	// a: 10-4 by the group's cursor; b: 5, the group has no cursor there.
	if p.Lag != 11 || p.LastCycle == nil {
		t.Fatalf("progress %+v, want lag 11 and the cursor's time", p)
	}
}

func TestApplyQuotaLeavesAnUnchangedRowAlone(t *testing.T) {
	b, cell, _ := setup(t)
	max := int32(3)
	if _, err := cell.ApplyQuota(ctx, celldb.Quota{Tenant: "acme", Enabled: true, MaxQueries: &max}); err != nil {
		t.Fatal(err)
	}
	var first, second time.Time
	if err := b.Pool.QueryRow(ctx, `SELECT updated_at FROM queen_streams.quota WHERE tenant = 'acme'`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if _, err := cell.ApplyQuota(ctx, celldb.Quota{Tenant: "acme", Enabled: true, MaxQueries: &max}); err != nil {
		t.Fatal(err)
	}
	if err := b.Pool.QueryRow(ctx, `SELECT updated_at FROM queen_streams.quota WHERE tenant = 'acme'`).Scan(&second); err != nil {
		t.Fatal(err)
	}
	if !first.Equal(second) {
		t.Fatalf("an unchanged grant was rewritten (%s, then %s)", first, second)
	}
}

func TestApplyQuotaCountsTheTenantsQueries(t *testing.T) {
	b, cell, _ := setup(t)
	execSQL(t, b, `INSERT INTO queen_streams.queries (id, tenant, name, source_queue, config_hash) VALUES
		(gen_random_uuid(), 'acme', 'a', 's', 'h'), (gen_random_uuid(), 'acme', 'b', 's', 'h')`)
	n, err := cell.ApplyQuota(ctx, celldb.Quota{Tenant: "acme", Enabled: true})
	if err != nil || n != 2 {
		t.Fatalf("registered = %d, %v; want 2 (the default tenant's query is not acme's)", n, err)
	}
}
