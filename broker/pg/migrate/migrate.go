// Package migrate applies Regent's schema. Tables, indexes and types are
// versioned, forward-only migrations (migrations/NNNN_name.sql), each applied
// exactly once. Every function lives in a file of its own, named after it
// (functions/<schema>.<name>.sql), and is applied with CREATE OR REPLACE on
// every migrate whose copy differs from the one the database last received.
// Both run under one PostgreSQL advisory lock, so brokers starting together
// cannot race each other. UPGRADING.md beside this file is the policy that
// keeps a rolling upgrade safe; schema.sql is the schema this produces.
package migrate

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql functions/*.sql
var files embed.FS

// lockKey is the advisory lock every migrating process takes. It is an
// arbitrary constant ("regent" in ASCII) shared by all versions of Regent.
const lockKey int64 = 0x726567656e74

// Migration is one versioned SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Function is the file of one function: Name is its schema-qualified name.
type Function struct {
	Name string
	SQL  string
}

// ErrPreReleaseHistory is returned for a database migrated by a build from
// before the history was squashed into the baseline.
var ErrPreReleaseHistory = errors.New("the database holds Regent's pre-release migration history")

// All returns the embedded migrations in version order.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(files, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	out := make([]Migration, 0, len(entries))
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		prefix, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must start with a positive version and an underscore", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %q and %q share version %d", other, name, v)
		}
		seen[v] = name
		body, err := files.ReadFile(path.Join("migrations", name))
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Functions returns the embedded function files, sorted by name.
func Functions() ([]Function, error) {
	entries, err := fs.ReadDir(files, "functions")
	if err != nil {
		return nil, fmt.Errorf("read embedded functions: %w", err)
	}
	out := make([]Function, 0, len(entries))
	for _, e := range entries {
		body, err := files.ReadFile(path.Join("functions", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read function %q: %w", e.Name(), err)
		}
		out = append(out, Function{Name: strings.TrimSuffix(e.Name(), ".sql"), SQL: string(body)})
	}
	return out, nil
}

// Up applies every migration the database has not recorded yet, then every
// function file whose text the database has not received yet, and returns
// how many migrations it applied. Each migration runs in its own
// transaction with its bookkeeping row, and the functions in one more, so a
// failure leaves no half-applied file.
func Up(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (int, error) {
	migrations, err := All()
	if err != nil {
		return 0, err
	}
	functions, err := Functions()
	if err != nil {
		return 0, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("acquire connection for migrations: %w", err)
	}
	defer conn.Release()

	// A session lock, held across the transactions, serialises concurrent
	// migrators; the second one finds everything applied.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return 0, fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		// A fresh context: the caller's may be cancelled, and an unreleased
		// session lock would outlive this call on a pooled connection.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey)
	}()

	onCitus, err := citus(ctx, conn.Conn())
	if err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS public.regent_schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now());
		CREATE TABLE IF NOT EXISTS public.regent_schema_functions (
		name       text PRIMARY KEY,
		sha256     text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, fmt.Errorf("create bookkeeping tables: %w", err)
	}
	rows, err := conn.Query(ctx, "SELECT version, name FROM public.regent_schema_migrations ORDER BY version")
	if err != nil {
		return 0, fmt.Errorf("read applied migrations: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Version int32
		Name    string
	}])
	if err != nil {
		return 0, fmt.Errorf("read applied migrations: %w", err)
	}
	known := map[int]string{}
	for _, m := range migrations {
		known[m.Version] = m.Name
	}
	done := map[int]bool{}
	for _, a := range applied {
		if known[int(a.Version)] != a.Name {
			return 0, fmt.Errorf("%w (migration %d %q, which this build does not have): it was squashed into one "+
				"baseline before the first release and cannot be upgraded. Recreate the database: "+
				"DROP SCHEMA queen, queen_streams CASCADE; DROP TABLE public.regent_schema_migrations, "+
				"public.regent_schema_functions; then start the broker again (or run `broker migrate`)",
				ErrPreReleaseHistory, a.Version, a.Name)
		}
		done[int(a.Version)] = true
	}

	n := 0
	for _, m := range migrations {
		if done[m.Version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO public.regent_schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		if err != nil {
			return n, fmt.Errorf("apply migration %s: %w", m.Name, err)
		}
		if log != nil {
			log.Info("applied migration", "version", m.Version, "name", m.Name)
		}
		n++
	}
	// Citus places a table by renaming it to a shard and creating it
	// again, so a function declared with the table's row type must be
	// created after: before the functions.
	if onCitus {
		if err := distribute(ctx, conn.Conn(), log); err != nil {
			return n, err
		}
	}
	if err := applyFunctions(ctx, conn.Conn(), functions, log); err != nil {
		return n, err
	}
	if onCitus {
		set, err := fitFunctions(ctx, conn.Conn())
		if set {
			// A session takes the database's settings when it starts:
			// the pool's, this one included, start again.
			pool.Reset()
		}
		return n, err
	}
	return n, nil
}

// undefinedTable is PostgreSQL's SQLSTATE for a table that does not exist.
const undefinedTable = "42P01"

// Current reports whether the database has every migration this build
// embeds. A database never migrated (no bookkeeping table) has none; an
// unreachable one is an error.
func Current(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	migrations, err := All()
	if err != nil {
		return false, err
	}
	var latest int
	err = pool.QueryRow(ctx, `SELECT coalesce(max(version), 0)::int FROM public.regent_schema_migrations`).Scan(&latest)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == undefinedTable {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the applied migrations: %w", err)
	}
	return len(migrations) == 0 || latest >= migrations[len(migrations)-1].Version, nil
}

// applyFunctions replaces the functions whose file differs from the copy the
// database last received. An unchanged function is left alone: replacing it
// would invalidate every session's cached plans for nothing.
func applyFunctions(ctx context.Context, conn *pgx.Conn, functions []Function, log *slog.Logger) error {
	have := map[string]string{}
	rows, err := conn.Query(ctx, "SELECT name, sha256 FROM public.regent_schema_functions")
	if err != nil {
		return fmt.Errorf("read applied functions: %w", err)
	}
	var name, sum string
	if _, err := pgx.ForEachRow(rows, []any{&name, &sum}, func() error { have[name] = sum; return nil }); err != nil {
		return fmt.Errorf("read applied functions: %w", err)
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Files are applied in name order, and a SQL function's body is
		// checked against the functions it calls: check them all at their
		// first call instead, as pg_dump's output does.
		if _, err := tx.Exec(ctx, "SET LOCAL check_function_bodies = off"); err != nil {
			return fmt.Errorf("apply functions: %w", err)
		}
		for _, f := range functions {
			h := sha256.Sum256([]byte(f.SQL))
			sum := hex.EncodeToString(h[:])
			if have[f.Name] == sum {
				continue
			}
			if _, err := tx.Exec(ctx, f.SQL); err != nil {
				return fmt.Errorf("apply function %s: %w", f.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO public.regent_schema_functions (name, sha256) VALUES ($1, $2)
				ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, applied_at = now()`, f.Name, sum); err != nil {
				return fmt.Errorf("record function %s: %w", f.Name, err)
			}
			if log != nil {
				log.Info("applied function", "name", f.Name)
			}
		}
		return nil
	})
}
