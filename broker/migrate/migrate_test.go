package migrate_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/migrate"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestMigrationsApplyInOrderAndAreRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
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
