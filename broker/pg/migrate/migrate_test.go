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

	"github.com/regent-mq/regent/broker/pg/migrate"
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
	1:  "d9ac688ca64070eca992dd0561b8a99a167849d578d4e74f2767daeb86b426e6",
	2:  "4819c2e78d952335c180938c349d20c7a8fa1a844250314fd118118d8e1f7335",
	3:  "32f77f282dc2c3481aab220a36fed2b5c36486da5a494c96d72715cc94ee9529",
	4:  "b8f7b0f75869a07620a45f647ffe415a2905ae2a4aa7d899adf38620a326862a",
	5:  "75625ec8cfd9ae72d716185d5f53c3d2634004cf6b38c4938dd99570da0e85f4",
	6:  "c3e664ae613c8504b45df0f062de58a3723bad420951ea63a13b91a4ad2583c2",
	8:  "bc7a4f6822415de59066185e5b27aea079b04b5eef5c4b9a9bc508447b2f7c46",
	9:  "4bf3bd9cd49979f89e6f2bb81b7eafedcd7e82da821d5320cc01627c2b5ea101",
	11: "4d1b5a575145679a51c85614d2350ca080aac670d168a6c9c41740cf18b8b1e9",
	12: "3ee43571e0b9b65ad2850883fe10dca2c044a6114ab173c829677f7e13678fc0",
	13: "1a190dc985e2258cb44374da0500976cb9d6c3969332b42c95ae5bf5bcff8ba4",
	14: "1d5c2cf2c805da9ec33b3944c52492113a0aad690b3f869016e47597e1450eb4",
	15: "3a069a052aa85b6aeb0cdad8453d9d92af76f0e43e3223138d4501c45aa61e75",
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
	if _, err := pool.Exec(ctx, `UPDATE public.regent_schema_functions SET sha256 = 'stale' WHERE name = 'queen.pop_v2'`); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	var sum string
	if err := pool.QueryRow(ctx, `SELECT sha256 FROM public.regent_schema_functions WHERE name = 'queen.pop_v2'`).Scan(&sum); err != nil || sum == "stale" {
		t.Fatalf("queen.pop_v2 was not applied again after its record changed (%q, %v)", sum, err)
	}
}
