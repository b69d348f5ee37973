package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/pg/migrate"
	"github.com/regent-mq/regent/test/pgtest"
)

// The rules of UPGRADING.md that a test can hold: the database has the
// functions Regent calls, the ones they call, and the previous versions the
// policy keeps, and nothing else; each function file is that one function.

// call is a schema-qualified call in SQL text: queen.pop( or queen_streams.cycle(.
var call = regexp.MustCompile(`\b(queen|queen_streams)\.([A-Za-z_][A-Za-z0-9_]*)\(`)

// goCalls returns the functions that the non-test Go code of the broker, the
// operator and the commands calls in its SQL string literals, each with a
// file that calls it.
func goCalls(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join("..", "..", "..")
	calls := map[string]string{}
	for _, dir := range []string{"broker", "controllers", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			var s scanner.Scanner
			fset := token.NewFileSet()
			s.Init(fset.AddFile(p, -1, len(src)), src, nil, 0)
			for {
				_, tok, lit := s.Scan()
				if tok == token.EOF {
					break
				}
				if tok != token.STRING {
					continue
				}
				text, err := strconv.Unquote(lit)
				if err != nil {
					return fmt.Errorf("%s: string literal %s: %w", p, lit, err)
				}
				for _, m := range call.FindAllStringSubmatch(text, -1) {
					if _, ok := calls[m[1]+"."+m[2]]; !ok {
						rel, _ := filepath.Rel(root, p)
						calls[m[1]+"."+m[2]] = rel
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("scan %s: %v", dir, err)
		}
	}
	return calls
}

// dbFunctions returns the bodies of the functions and procedures in
// Regent's schemas, by schema-qualified name, and the names of its tables,
// views and sequences, which look like calls in INSERT INTO queen.queues(…).
func dbFunctions(t *testing.T, pool *pgxpool.Pool) (bodies map[string][]string, relations map[string]bool) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT n.nspname || '.' || p.proname, p.prosrc FROM pg_proc p
		JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname IN ('queen', 'queen_streams')`)
	if err != nil {
		t.Fatal(err)
	}
	bodies = map[string][]string{}
	var name, src string
	if _, err := pgx.ForEachRow(rows, []any{&name, &src}, func() error {
		bodies[name] = append(bodies[name], src)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rows, err = pool.Query(ctx, `SELECT n.nspname || '.' || c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN ('queen', 'queen_streams')`)
	if err != nil {
		t.Fatal(err)
	}
	relations = map[string]bool{}
	if _, err := pgx.ForEachRow(rows, []any{&name}, func() error { relations[name] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return bodies, relations
}

func TestEveryFunctionInTheDatabaseIsCalledOrAKeptPreviousVersion(t *testing.T) {
	t.Parallel()
	bodies, relations := dbFunctions(t, pgtest.New(t))
	// Reached from the Go code and the kept previous versions, through the
	// bodies of what is reached.
	reached := map[string]bool{}
	var queue []string
	for name := range goCalls(t) {
		queue = append(queue, name)
	}
	queue = append(queue, migrate.Previous...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if reached[name] || relations[name] {
			continue
		}
		reached[name] = true
		for _, src := range bodies[name] {
			for _, m := range call.FindAllStringSubmatch(src, -1) {
				queue = append(queue, m[1]+"."+m[2])
			}
		}
	}
	var unknown []string
	for name := range bodies {
		if !reached[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("the database has functions that no Go code calls, directly or through another function, "+
			"and that migrate.Previous does not keep: %s. Drop each one with a migration and delete its file "+
			"(UPGRADING.md), or list a previous version the policy keeps in migrate.Previous", strings.Join(unknown, ", "))
	}
}

func TestEveryFunctionTheGoCodeCallsIsInTheDatabase(t *testing.T) {
	t.Parallel()
	bodies, relations := dbFunctions(t, pgtest.New(t))
	calls := goCalls(t)
	if len(calls) == 0 {
		t.Fatal("found no call of a function in the Go code: the scan is broken")
	}
	for name, file := range calls {
		if bodies[name] == nil && !relations[name] {
			t.Errorf("%s calls %s, which a migrated database does not have", file, name)
		}
	}
	for _, name := range migrate.Previous {
		if bodies[name] == nil {
			t.Errorf("migrate.Previous keeps %s, which a migrated database does not have", name)
		}
	}
}

// A new signature under an old name adds an overload beside the old one, which
// CREATE OR REPLACE never removes: a change of arguments is a new name.
func TestNoFunctionIsOverloaded(t *testing.T) {
	t.Parallel()
	bodies, _ := dbFunctions(t, pgtest.New(t))
	for name, b := range bodies {
		if len(b) > 1 {
			t.Errorf("%s has %d signatures; give a changed signature a new versioned name (UPGRADING.md)", name, len(b))
		}
	}
}

func TestEachFunctionFileCreatesExactlyTheFunctionItIsNamedAfter(t *testing.T) {
	t.Parallel()
	pool := ddlRecording(t)
	functions, err := migrate.Functions()
	if err != nil {
		t.Fatal(err)
	}
	if len(functions) == 0 {
		t.Fatal("no function files")
	}
	for _, f := range functions {
		for _, p := range fileProblems(t, pool, f) {
			t.Errorf("functions/%s.sql %s", f.Name, p)
		}
	}
	// The rule can fail: files that do more, or other, than their name says.
	for _, bad := range []migrate.Function{
		{Name: "queen.nothing", SQL: "SELECT 1"},
		{Name: "queen.other", SQL: "CREATE FUNCTION queen.not_other() RETURNS int LANGUAGE sql AS 'SELECT 1'"},
		{Name: "queen.twice", SQL: `CREATE FUNCTION queen.twice() RETURNS int LANGUAGE sql AS 'SELECT 1';
			CREATE FUNCTION queen.twice(int) RETURNS int LANGUAGE sql AS 'SELECT 1'`},
		{Name: "queen.extra", SQL: `CREATE FUNCTION queen.extra() RETURNS int LANGUAGE sql AS 'SELECT 1';
			CREATE TABLE queen.extra_rows (n int)`},
		{Name: "queen.dropper", SQL: `CREATE FUNCTION queen.dropper() RETURNS int LANGUAGE sql AS 'SELECT 1';
			DROP TABLE queen.push_dedup CASCADE`},
	} {
		if len(fileProblems(t, pool, bad)) == 0 {
			t.Errorf("the check passed a file %s that does not hold exactly that function: %s", bad.Name, bad.SQL)
		}
	}
}

// ddlRecording is a pool on a migrated database whose event triggers record
// in public.ddl_seen every DDL command run, wherever it stands in a file's
// text, and every object dropped.
func ddlRecording(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.New(t)
	if _, err := pool.Exec(context.Background(), `
		CREATE TABLE public.ddl_seen (tag text, object_type text, identity text);
		CREATE FUNCTION public.ddl_seen() RETURNS event_trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO public.ddl_seen SELECT command_tag, object_type, object_identity FROM pg_event_trigger_ddl_commands();
		END $$;
		CREATE FUNCTION public.drop_seen() RETURNS event_trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO public.ddl_seen SELECT 'DROP', object_type, object_identity FROM pg_event_trigger_dropped_objects();
		END $$;
		CREATE EVENT TRIGGER ddl_seen ON ddl_command_end EXECUTE FUNCTION public.ddl_seen();
		CREATE EVENT TRIGGER drop_seen ON sql_drop EXECUTE FUNCTION public.drop_seen()`); err != nil {
		t.Fatal(err)
	}
	return pool
}

// errRollback ends a transaction whose effects the test only looks at.
var errRollback = errors.New("rolled back")

// fileProblems runs f in a transaction that it rolls back, and says what in
// it is not the one function f is named after.
func fileProblems(t *testing.T, pool *pgxpool.Pool, f migrate.Function) []string {
	t.Helper()
	ctx := context.Background()
	var seen [][3]string
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, f.SQL); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT tag, object_type, identity FROM public.ddl_seen`)
		if err != nil {
			return err
		}
		var tag, typ, id string
		if _, err := pgx.ForEachRow(rows, []any{&tag, &typ, &id}, func() error {
			seen = append(seen, [3]string{tag, typ, id})
			return nil
		}); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		return []string{"does not apply: " + err.Error()}
	}
	var problems []string
	creates := 0
	for _, s := range seen {
		tag, typ, id := s[0], s[1], s[2]
		if name, _, _ := strings.Cut(id, "("); name != f.Name || (typ != "function" && typ != "procedure") {
			problems = append(problems, fmt.Sprintf("runs %s on %s %s: a function file holds its one function and nothing else", tag, typ, id))
		} else if tag == "CREATE FUNCTION" || tag == "CREATE PROCEDURE" {
			creates++
		}
	}
	if creates != 1 {
		problems = append(problems, fmt.Sprintf("creates %s %d times, want exactly once", f.Name, creates))
	}
	return problems
}
