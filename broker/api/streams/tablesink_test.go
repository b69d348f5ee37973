package streams_test

import (
	"strings"
	"testing"

	"github.com/regent-mq/regent/broker/api/streams/wire"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

// windowColumns is a sink table of a pipeline's plain windows: key,
// window start, count.
var windowColumns = []dbtest.TableColumn{
	{Name: "key", Type: "text", NotNull: true},
	{Name: "windowStart", Type: "timestamptz", NotNull: true},
	{Name: "count", Type: "bigint"},
}

// tableFixture is the cycle fixture's query with a table sink: table
// b.Q("t") of the broker's tenant, keyed on key and windowStart, in mode.
type tableFixture struct {
	fixture
	table string
}

func newTableFixture(t testing.TB, mode string) tableFixture {
	t.Helper()
	f := newFixture(t)
	table := f.b.Q("t")
	f.b.CreateTable(t, table, windowColumns, "key", "windowStart")
	r := registerTable(t, f.b, "q", map[string]any{"table": table, "key_columns": []string{"key", "windowStart"}, "mode": mode})
	wantStatus(t, r, 200)
	if got := r.Header.Get(wire.SinkTableHeader); got != table {
		t.Fatalf("%s header %q, want %q", wire.SinkTableHeader, got, table)
	}
	return tableFixture{fixture: f, table: table}
}

// registerTable registers query b.Q(name) on b.Q("src") with sink_table
// as given (absent when nil).
func registerTable(t testing.TB, b *brokertest.Broker, name string, sinkTable any) brokertest.Response {
	t.Helper()
	body := map[string]any{"name": b.Q(name), "source_queue": b.Q("src"), "sink_queue": b.Q("out"), "config_hash": "h"}
	if sinkTable != nil {
		body["sink_table"] = sinkTable
	}
	return post(t, b, "/streams/v1/queries", body)
}

func row(key, start string, count int) map[string]any {
	return map[string]any{"key": key, "windowStart": start, "count": count}
}

// rowsOf is how TableRows reads a windowColumns row.
func rowsOf(rows ...string) []string { return rows }

func wantRows(t testing.TB, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("table rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const (
	t0 = "2026-01-01T00:00:00Z"
	t1 = "2026-01-01T00:01:00Z"
)

var (
	a0 = `{"key": "a", "count": 2, "windowStart": "2026-01-01T00:00:00+00:00"}`
	b0 = `{"key": "b", "count": 1, "windowStart": "2026-01-01T00:00:00+00:00"}`
)

func TestACycleWritesItsTableRowsWithItsStateAndAckInOneTransaction(t *testing.T) {
	t.Parallel()
	f := newTableFixture(t, "upsert")
	f.b.PushN(t, f.src, "", 0, 3)
	p := pop(t, f.b, f.src, 10, "")
	a := committed(t, f.b, f.body(map[string]any{
		"state_ops":  []any{map[string]any{"type": "upsert", "key": "clock", "value": 1}},
		"table_rows": []any{row("a", t0, 2), row("b", t0, 1)},
		"ack":        ack(p.LeaseID, "completed", nil)}))
	if a.AckResult == nil || a.AckResult.Count != 3 {
		t.Fatalf("ack %+v, want 3 acknowledged", a.AckResult)
	}
	wantRows(t, f.b.TableRows(t, f.table), rowsOf(a0, b0))
	if got := f.state(t); got["clock"] != "1" {
		t.Fatalf("state %v, want the clock written beside the rows", got)
	}
	w, err := f.b.DB.SinkWrites(t.Context(), f.query)
	if err != nil {
		t.Fatal(err)
	}
	if w.Rows != 2 || w.WrittenAt == nil {
		t.Fatalf("sink writes %+v, want 2 rows and a write time", w)
	}
}

func TestUpsertReplacesTheRowOfTheSameKeyColumnsAndAppendAddsOne(t *testing.T) {
	t.Parallel()
	up := newTableFixture(t, "upsert")
	committed(t, up.b, up.body(map[string]any{"table_rows": []any{row("a", t0, 1), row("b", t0, 1)}}))
	// A late event re-emits window a; within one cycle, the last row of a
	// key wins.
	committed(t, up.b, up.body(map[string]any{"table_rows": []any{row("a", t0, 5), row("a", t0, 2)}}))
	wantRows(t, up.b.TableRows(t, up.table), rowsOf(a0, b0))

	ap := newTableFixture(t, "append")
	committed(t, ap.b, ap.body(map[string]any{"table_rows": []any{row("a", t0, 1)}}))
	committed(t, ap.b, ap.body(map[string]any{"table_rows": []any{row("a", t1, 2)}}))
	if got := ap.b.TableRows(t, ap.table); len(got) != 2 {
		t.Fatalf("append table holds %v, want two rows", got)
	}
}

func TestARefusedCycleWritesNoTableRows(t *testing.T) {
	t.Parallel()
	f := newTableFixture(t, "upsert")
	f.b.PushN(t, f.src, "", 0, 2)
	pop(t, f.b, f.src, 10, "")
	before := f.cursor(t, "__QUEUE_MODE__")
	refused(t, f.b, f.body(map[string]any{"table_rows": []any{row("a", t0, 2)},
		"ack": ack("00000000-0000-0000-0000-000000000001", "completed", nil)}), "lease")
	wantRows(t, f.b.TableRows(t, f.table), nil)
	f.wantNothingWritten(t, f.out, before)
}

func TestTableRowsThatDoNotFitTheTableAre400AndNothingOfTheCycleIsWritten(t *testing.T) {
	t.Parallel()
	f := newTableFixture(t, "upsert")
	f.b.PushN(t, f.src, "", 0, 2)
	p := pop(t, f.b, f.src, 10, "")
	before := f.cursor(t, "__QUEUE_MODE__")
	for _, rows := range []any{
		[]any{row("a", "not a time", 1)},                             // a value of another type
		[]any{map[string]any{"key": "a", "windowStart": t0, "n": 1}}, // a column the table lacks
		[]any{map[string]any{"windowStart": t0, "count": 1}},         // a key column missing
		[]any{row("a", t0, 1), 7},                                    // not an object
		map[string]any{"key": "a"},                                   // not an array
		[]any{map[string]any{strings.Repeat("k", 64): 1}},            // a name PostgreSQL would cut
	} {
		r := post(t, f.b, "/streams/v1/cycle", f.body(map[string]any{
			"state_ops":  []any{map[string]any{"type": "upsert", "key": "clock", "value": 1}},
			"push_items": []any{map[string]any{"queue": f.out, "payload": 1}},
			"table_rows": rows, "ack": ack(p.LeaseID, "completed", nil)}))
		wantStatus(t, r, 400)
		if !strings.Contains(string(r.Body), "table_rows") {
			t.Fatalf("400 %s does not name table_rows", r.Body)
		}
		wantRows(t, f.b.TableRows(t, f.table), nil)
		f.wantNothingWritten(t, f.out, before)
	}
}

func TestTableRowsOfAQueryWithoutATableSinkAre400(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := post(t, f.b, "/streams/v1/cycle", f.body(map[string]any{"table_rows": []any{row("a", t0, 1)}}))
	wantStatus(t, r, 400)
	if !strings.Contains(string(r.Body), "no table sink") {
		t.Fatalf("400 %s does not say the query has no table sink", r.Body)
	}
}

func TestACycleWithoutTableRowsIsTheSeedsCycle(t *testing.T) {
	t.Parallel()
	f := newTableFixture(t, "upsert")
	for _, fields := range []map[string]any{{}, {"table_rows": nil}, {"table_rows": []any{}}} {
		committed(t, f.b, f.body(fields))
	}
	wantRows(t, f.b.TableRows(t, f.table), nil)
}

func TestATableSinkRegistrationIsRefusedUntilTheTableCanBeWritten(t *testing.T) {
	t.Parallel()
	b := shared(t)
	keyed := b.Q("keyed")
	b.CreateTable(t, keyed, windowColumns, "key", "windowStart")
	loose := b.Q("loose")
	b.CreateTable(t, loose, windowColumns)
	keys := []string{"key", "windowStart"}
	for _, c := range []struct {
		sink any
		want string
	}{
		{map[string]any{"table": b.Q("absent"), "key_columns": keys}, "does not exist"},
		{map[string]any{"table": loose, "key_columns": keys}, "no unique index on exactly its key columns"},
		{map[string]any{"table": keyed, "key_columns": []string{"key"}}, "no unique index on exactly its key columns"},
		{map[string]any{"table": keyed, "key_columns": []string{"key", "nope"}}, `no key column nope`},
		{map[string]any{"table": keyed, "key_columns": []string{"key", "key"}}, "appears twice"},
		{map[string]any{"table": keyed, "key_columns": keys, "mode": "merge"}, "neither upsert nor append"},
		{map[string]any{"table": keyed}, "mode upsert needs key columns"},
		{map[string]any{"table": keyed, "key_columns": keys, "schema": "public"}, "is not tenant"},
		{map[string]any{"table": ""}, "sink_table.table is required"},
		{map[string]any{"table": "t\u0000"}, "sink_table.table must not contain NUL"},
		{"keyed", "sink_table must be an object"},
	} {
		r := registerTable(t, b, "q", c.sink)
		wantStatus(t, r, 400)
		if !strings.Contains(string(r.Body), c.want) {
			t.Fatalf("sink_table %v: 400 %s does not say %q", c.sink, r.Body, c.want)
		}
	}
	if n := b.StreamQueries(t, b.Q("q")); n != 0 {
		t.Fatalf("%d queries registered by refused registrations", n)
	}
	// Append needs no unique index, nor key columns.
	wantStatus(t, registerTable(t, b, "q", map[string]any{"table": loose, "mode": "append"}), 200)
}

func TestARegistrationWithoutSinkTableKeepsTheQuerysAndNullRemovesIt(t *testing.T) {
	t.Parallel()
	f := newTableFixture(t, "upsert")
	// A stock worker registers the query again, knowing nothing of tables.
	r := registerTable(t, f.b, "q", nil)
	wantStatus(t, r, 200)
	if got := r.Header.Get(wire.SinkTableHeader); got != f.table {
		t.Fatalf("after a registration without sink_table the header says %q, want %q", got, f.table)
	}
	committed(t, f.b, f.body(map[string]any{"table_rows": []any{row("a", t0, 2)}}))
	r = post(t, f.b, "/streams/v1/queries", map[string]any{"name": f.b.Q("q"), "source_queue": f.src, "config_hash": "h", "sink_table": nil})
	wantStatus(t, r, 200)
	if got := r.Header.Get(wire.SinkTableHeader); got != "" {
		t.Fatalf("after sink_table null the header says %q, want none", got)
	}
	wantStatus(t, post(t, f.b, "/streams/v1/cycle", f.body(map[string]any{"table_rows": []any{row("a", t0, 2)}})), 400)
}

// One tenant's name for a table is resolved in its own schema only: it can
// neither write into another tenant's table nor tell that one exists.
func TestOneTenantCanNeitherWriteNorDetectAnothersTable(t *testing.T) {
	t.Parallel()
	x := twoTenants(t)
	grant(t, x.b, x.redTenant, nil)
	if err := x.b.DB.CreateTable(t.Context(), x.blueTenant, "totals", windowColumns, []string{"key", "windowStart"}); err != nil {
		t.Fatal(err)
	}
	blueSchema, err := x.b.DB.TenantSchema(t.Context(), x.blueTenant)
	if err != nil {
		t.Fatal(err)
	}
	reg := func(token string, sink map[string]any) brokertest.Response {
		return x.b.Do(t, "POST", "/streams/v1/queries", token, map[string]any{"name": "q", "source_queue": "src",
			"config_hash": "h", "sink_table": sink})
	}
	keys := []string{"key", "windowStart"}
	taken := reg(x.red, map[string]any{"table": "totals", "key_columns": keys})
	absent := reg(x.red, map[string]any{"table": "nothing", "key_columns": keys})
	wantStatus(t, taken, 400)
	wantStatus(t, absent, 400)
	if strings.ReplaceAll(string(taken.Body), "totals", "X") != strings.ReplaceAll(string(absent.Body), "nothing", "X") {
		t.Fatalf("red tells blue's table from no table:\n%s\n%s", taken.Body, absent.Body)
	}
	other := reg(x.red, map[string]any{"table": "totals", "key_columns": keys, "schema": blueSchema})
	wantStatus(t, other, 400)
	if !strings.Contains(string(other.Body), "schema "+blueSchema+" is not tenant '"+x.redTenant+"''s") {
		t.Fatalf("400 %s does not say why another tenant's schema is refused", other.Body)
	}
	wantStatus(t, reg(x.blue, map[string]any{"table": "totals", "key_columns": keys}), 200)
	rows, err := x.b.DB.TableRows(t.Context(), x.blueTenant, "totals")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Fatalf("blue's table holds %v", rows)
	}
}

func TestTheQueryListingShowsATableSinksRowCountAndLastWrite(t *testing.T) {
	t.Parallel()
	f := newTableFixture(t, "upsert")
	other := register(t, f.b, "plain", "src", "out", "h", false)
	if s := f.b.Query(t, "", f.b.Q("q")).SinkTable; s == nil || s.Table != f.table || s.Mode != "upsert" || s.Rows == nil ||
		*s.Rows != 0 || s.Written != 0 || s.LastWrite != nil || s.RowsEstimated {
		t.Fatalf("sink_table before any cycle %+v, want the table, 0 rows, none written", s)
	}
	committed(t, f.b, f.body(map[string]any{"table_rows": []any{row("a", t0, 1), row("b", t0, 1)}}))
	committed(t, f.b, f.body(map[string]any{"table_rows": []any{row("a", t0, 2)}}))
	s := f.b.Query(t, "", f.b.Q("q")).SinkTable
	if s == nil || s.Rows == nil || *s.Rows != 2 || s.Written != 3 || s.LastWrite == nil {
		t.Fatalf("sink_table %+v, want 2 rows, 3 written, a last write", s)
	}
	if s := f.b.Query(t, "", other.Name).SinkTable; s != nil {
		t.Fatalf("a query without a table sink lists sink_table %+v", s)
	}
}
