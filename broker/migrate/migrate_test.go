package migrate_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
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
// tables is a new version. (Functions are not migrations: see UPGRADING.md.)
var landed = map[int]string{
	1: "d9ac688ca64070eca992dd0561b8a99a167849d578d4e74f2767daeb86b426e6",
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

func TestADatabaseWithThePreReleaseHistoryIsRefusedUntouched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	// What a pre-release broker left: its bookkeeping rows and a schema.
	if _, err := pool.Exec(ctx, `CREATE SCHEMA queen;
		CREATE TABLE public.regent_schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO public.regent_schema_migrations (version, name) VALUES (1, '0001_schemas'), (2, '0002_log')`); err != nil {
		t.Fatal(err)
	}
	_, err := migrate.Up(ctx, pool, nil)
	if !errors.Is(err, migrate.ErrPreReleaseHistory) {
		t.Fatalf("Up over the pre-release history: %v, want ErrPreReleaseHistory", err)
	}
	for _, want := range []string{"0001_schemas", "DROP SCHEMA queen, queen_streams CASCADE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	var tables int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname IN ('queen', 'queen_streams')`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("the refused database gained %d tables", tables)
	}
}

func TestUnchangedFunctionsAreNotReplacedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	if _, err := migrate.Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	var before []uint32
	if err := pool.QueryRow(ctx, `SELECT array_agg(xmin::text::bigint ORDER BY oid) FROM pg_proc
		WHERE pronamespace IN ('queen'::regnamespace, 'queen_streams'::regnamespace)`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	var after []uint32
	if err := pool.QueryRow(ctx, `SELECT array_agg(xmin::text::bigint ORDER BY oid) FROM pg_proc
		WHERE pronamespace IN ('queen'::regnamespace, 'queen_streams'::regnamespace)`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("a second migrate rewrote unchanged functions (xmin %v, then %v)", before, after)
	}
	// A changed file is applied again: make the database's record stale.
	if _, err := pool.Exec(ctx, `UPDATE public.regent_schema_functions SET sha256 = 'stale' WHERE name = 'queen.pop'`); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	var sum string
	if err := pool.QueryRow(ctx, `SELECT sha256 FROM public.regent_schema_functions WHERE name = 'queen.pop'`).Scan(&sum); err != nil || sum == "stale" {
		t.Fatalf("queen.pop was not applied again after its record changed (%q, %v)", sum, err)
	}
}
