package migrate_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/migrate"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// emptyPool connects to a database of its own that holds no schema yet.
func emptyPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestMigrationsApplyInOrderAndAreRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	all, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	n, err := migrate.Up(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(all) {
		t.Fatalf("applied %d migrations, want %d", n, len(all))
	}
	var schemas int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname IN ('queen','queen_streams')`).Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	if schemas != 2 {
		t.Fatalf("found %d of the schemas queen and queen_streams", schemas)
	}
	rows, err := pool.Query(ctx, `SELECT version FROM public.regent_schema_migrations ORDER BY applied_at, version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var i int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != all[i].Version {
			t.Fatalf("recorded version %d at position %d, want %d", v, i, all[i].Version)
		}
		i++
	}
	n, err = migrate.Up(ctx, pool, nil)
	if err != nil || n != 0 {
		t.Fatalf("second Up applied %d (err %v), want 0", n, err)
	}
}

func TestConcurrentMigratorsApplyEachVersionOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.EmptyURL(t)
	const migrators = 4
	var wg sync.WaitGroup
	applied := make([]int, migrators)
	errs := make([]error, migrators)
	for i := range migrators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				errs[i] = err
				return
			}
			defer pool.Close()
			applied[i], errs[i] = migrate.Up(ctx, pool, nil)
		}()
	}
	wg.Wait()
	total := 0
	for i := range migrators {
		if errs[i] != nil {
			t.Fatalf("migrator %d: %v", i, errs[i])
		}
		total += applied[i]
	}
	all, _ := migrate.All()
	if total != len(all) {
		t.Fatalf("migrators applied %d migrations in all, want exactly %d", total, len(all))
	}
}

// landed is the SHA-256 of every migration as it was first applied by a
// released broker. The migrator runs each version once, so an edit to one of
// them would reach new databases and never running ones: a change to the
// schema is a new version.
var landed = map[int]string{
	1:  "901be9cf0cbbd20f4a2f319c271daee5d643d216475a1e13bbdb75d731e55088",
	2:  "ca958e8e4a4ff3ef64027181657dd37f7a92df79ffd6195e5d49e1d4eb371032",
	3:  "e5b4ee5a41ff085beade30c5b97a258feee5fefec7000e2a46699c6ae7308e21",
	4:  "daa390a73adfa820d05ea6b5042a5ab8f985ffabb02761f2bbd1c63da7da8a65",
	5:  "50fe328278f279aea5033cd4c45b05b8f6810c95cdf66511a9a5c1c8c3fdcc48",
	6:  "d608052a577488025a6612e63b4f1a7dc2a794671003028a7f3f8212daf7abbb",
	7:  "661e971a9540477342113a2d8417aeabdb904de61425d579270cb5b0611a0212",
	8:  "d46c4240aeefa0c5a8351d74b2a6d456de27a877676b4c96decb0b63ffd79744",
	9:  "0fc1c734117a65aa8b31f11172604979211198616e582f269ccd9d97733de53a",
	10: "8613ab73b6bd9e678c07845bf494b23a63ccf35e3dce4a702498e3aab9e4a730",
	11: "4f2e7de9123e985c2a13e8f12ea68b932b8685f5fbec095b83f8e08cb2935e23",
	12: "19ab61f494af5cc4ec7cb9ae00376f411dff9f919ee73f2d0f83bd1d5d3e0a43",
}

func TestAppliedMigrationsAreNeverEdited(t *testing.T) {
	all, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		want, ok := landed[m.Version]
		if !ok {
			continue // a new version, not released yet
		}
		if got := fmt.Sprintf("%x", sha256.Sum256([]byte(m.SQL))); got != want {
			t.Errorf("migration %s was edited (sha256 %s): write the change as a new version", m.Name, got)
		}
	}
}

// Migration 9 replaces two functions that some databases already hold in
// its form (they applied an edited 0002 and 0004): over its own result it
// must apply cleanly, and leave both overloads of the allocator for brokers
// of either version.
func TestMigration9AppliesOverDatabasesThatAlreadyHaveItsFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	if _, err := migrate.Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	all, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Version == 9 {
			if _, err := pool.Exec(ctx, m.SQL); err != nil {
				t.Fatalf("migration 9 again: %v", err)
			}
		}
	}
	var args []int
	if err := pool.QueryRow(ctx, `SELECT array_agg(pronargs ORDER BY pronargs) FROM pg_proc
		WHERE oid::regprocedure::text LIKE 'queen.log_push_one_v1(%'`).Scan(&args); err != nil {
		t.Fatal(err)
	}
	if len(args) != 2 || args[0] != 9 || args[1] != 10 {
		t.Fatalf("queen.log_push_one_v1 overloads take %v arguments, want 9 and 10", args)
	}
	var generic bool
	if err := pool.QueryRow(ctx, `SELECT 'plan_cache_mode=force_generic_plan' = ANY (proconfig) FROM pg_proc
		WHERE oid = 'queen.pop_v1'::regproc`).Scan(&generic); err != nil || !generic {
		t.Fatalf("queen.pop_v1 lost its plan_cache_mode setting (err %v)", err)
	}
}
