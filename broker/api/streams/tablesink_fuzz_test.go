package streams_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/regent-mq/regent/broker/pg/celldb"
)

// FuzzTableSinkIdentifiersAreAlwaysQuoted sends table and column names
// with quotes, semicolons, dots and Unicode through every path that names
// them in SQL: the operator's createTable (queen_streams.sink_table_create),
// the registration's check (sink_table_check) and the cycle's write
// (cycle_table). Each name is one identifier wherever it goes: exactly the
// table named appears, in the tenant's schema alone, with exactly the
// column named, and holds exactly the row written; a name PostgreSQL would
// cut is refused.
func FuzzTableSinkIdentifiersAreAlwaysQuoted(f *testing.F) {
	for _, s := range [][2]string{
		{`t`, `k`},
		{`a"b`, `c"d`},
		{`x; DROP TABLE queen_streams.queries; --`, `k'); DELETE FROM t; --`},
		{`public.t`, `a.b`},
		{`Ünïcødé 表`, `ключ`},
		{`$1`, `%I`},
		{`back\slash`, `"`},
		{strings.Repeat("t", 80), `k`},
		{`t`, strings.Repeat("é", 40)},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, table, column string) {
		if table == "" || column == "" || column == "n" || !utf8.ValidString(table+column) || strings.ContainsRune(table+column, 0) {
			t.Skip("not a name PostgreSQL text can hold, or the other column's")
		}
		b := shared(t)
		ctx := t.Context()
		cdb := celldb.New(b.Pool)
		schema, err := b.DB.TenantSchema(ctx, b.Tenant)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(table + "\x00" + column))
		table = b.Q(hex.EncodeToString(sum[:3])) + table // one table per input, in the test's namespace
		before := tablesOf(t, b.DB.Tables, schema, "public", "queen", "queen_streams")

		created, err := cdb.CreateSinkTable(ctx, b.Tenant, table,
			[]celldb.SinkColumn{{Name: column, Type: "text"}, {Name: "n", Type: "bigint"}}, []string{column})
		var invalid *celldb.SinkInvalid
		if len(table) > 63 || len(column) > 63 {
			if !errors.As(err, &invalid) {
				t.Fatalf("createTable of a name PostgreSQL would cut answered %v, want a refusal", err)
			}
			if after := tablesOf(t, b.DB.Tables, schema, "public", "queen", "queen_streams"); !slices.Equal(after, before) {
				t.Fatalf("a refused createTable changed the tables: %v, was %v", after, before)
			}
			return
		}
		if err != nil || !created {
			t.Fatalf("createTable: created %v, %v", created, err)
		}
		after := tablesOf(t, b.DB.Tables, schema, "public", "queen", "queen_streams")
		if want := slices.Sorted(slices.Values(append(slices.Clone(before), schema+"\x00"+table))); !slices.Equal(after, want) {
			t.Fatalf("tables after createTable %q:\n%q\nwant exactly it added:\n%q", table, after, want)
		}
		cols, err := cdb.SinkColumns(ctx, b.Tenant, "", table)
		if err != nil || len(cols) != 2 || cols[0].Name != column || cols[1].Name != "n" {
			t.Fatalf("columns %+v (%v), want %q and n", cols, err, column)
		}

		name := b.Q("q" + hex.EncodeToString(sum[:6]))
		r := post(t, b, "/streams/v1/queries", map[string]any{"name": name, "source_queue": b.Q("src"), "config_hash": "h",
			"sink_table": map[string]any{"table": table, "key_columns": []string{column}}})
		wantStatus(t, r, 200)
		q := r.Map(t)["query_id"].(string)
		committed(t, b, map[string]any{"query_id": q, "partition_id": sourcePartition(t, b, "src"),
			"table_rows": []any{map[string]any{column: "v", "n": 1}}})
		rows := b.TableRows(t, table)
		if len(rows) != 1 {
			t.Fatalf("table %q holds %v, want one row", table, rows)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(rows[0]), &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[column] != "v" || got["n"] != float64(1) {
			t.Fatalf("row %s, want {%q: v, n: 1}", rows[0], column)
		}
	})
}

// tablesOf lists the tables of the schemas, each as schema NUL table,
// sorted.
func tablesOf(t *testing.T, list func(ctx context.Context, schema string) ([]string, error), schemas ...string) []string {
	t.Helper()
	var out []string
	for _, s := range schemas {
		names, err := list(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			out = append(out, s+"\x00"+n)
		}
	}
	slices.Sort(out)
	return out
}
