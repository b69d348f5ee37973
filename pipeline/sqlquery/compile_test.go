package sqlquery

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestEachQueryOfTheSubsetCompilesToItsPipeline(t *testing.T) {
	for _, tc := range []struct {
		name, sql, source string
		want              v1.Pipeline
	}{{
		name: "tumbling window with key, filter, having and casts",
		sql: `SELECT payload->>'region' AS region, count(*) AS orders, sum((payload->>'amount')::numeric) AS revenue, window_start, window_end
		      FROM orders
		      WHERE payload->>'status' = 'paid'
		      GROUP BY payload->>'region', TUMBLE((payload->>'ts')::timestamptz, INTERVAL '1 minute')
		      HAVING count(*) > 2`,
		source: "orders",
		want: v1.Pipeline{
			Filter: `string(payload.status) == "paid"`, KeyBy: `string(payload.region)`, EventTime: `timestamp(payload.ts)`,
			Window:    &v1.Window{Type: v1.WindowTumbling, Size: dur(time.Minute)},
			Aggregate: []v1.Aggregate{{Name: "orders", Fn: v1.FnCount}, {Name: "revenue", Fn: v1.FnSum, Of: "double(payload.amount)"}},
			Having:    "orders > 2",
			Project:   `{"region": key, "orders": orders, "revenue": revenue, "window_start": windowStart, "window_end": windowEnd}`,
		},
	}, {
		name:   "hop window on created_at, every aggregate, unnamed columns named as PostgreSQL does",
		sql:    `SELECT count(*), min((payload->>'n')::int), max((payload->>'n')::int), avg((payload->>'n')::float8), first(payload->'n'), last(payload->'n') FROM "clicks.eu-1" GROUP BY HOP(created_at, INTERVAL '10 seconds', INTERVAL '1' MINUTE)`,
		source: "clicks.eu-1",
		want: v1.Pipeline{
			Window: &v1.Window{Type: v1.WindowSliding, Size: dur(time.Minute), Slide: dur(10 * time.Second)},
			Aggregate: []v1.Aggregate{{Name: "count", Fn: v1.FnCount}, {Name: "min", Fn: v1.FnMin, Of: "int(payload.n)"},
				{Name: "max", Fn: v1.FnMax, Of: "int(payload.n)"}, {Name: "avg", Fn: v1.FnAvg, Of: "double(payload.n)"},
				{Name: "first", Fn: v1.FnFirst, Of: "payload.n"}, {Name: "last", Fn: v1.FnLast, Of: "payload.n"}},
			Project: `{"count": count, "min": min, "max": max, "avg": avg, "first": first, "last": last}`,
		},
	}, {
		name: "session window with lateness, idle flush and a late queue, epoch-millisecond time",
		sql: `SELECT payload->>'user' AS user, count(*) AS clicks FROM clicks
		      GROUP BY payload->>'user', SESSION((payload->>'ts')::bigint, INTERVAL '30s', lateness => INTERVAL '5 seconds', idle_flush => INTERVAL '2s', late => 'clicks.late')`,
		source: "clicks",
		want: v1.Pipeline{
			KeyBy: "string(payload.user)", EventTime: "int(payload.ts)", Late: "clicks.late",
			Window:    &v1.Window{Type: v1.WindowSession, Gap: dur(30 * time.Second), AllowedLateness: dur(5 * time.Second), IdleFlush: dur(2 * time.Second)},
			Aggregate: []v1.Aggregate{{Name: "clicks", Fn: v1.FnCount}},
			Project:   `{"user": key, "clicks": clicks}`,
		},
	}, {
		name: "two keys are joined without ambiguity and each is carried by first()",
		sql:  `SELECT payload->>'a' AS a, (payload->>'b')::int AS b, sum((payload->>'x')::numeric) AS total FROM q GROUP BY payload->>'a', (payload->>'b')::int, TUMBLE(created_at, INTERVAL '1h')`,
		want: v1.Pipeline{
			KeyBy:  `string(size(string(payload.a))) + ":" + string(payload.a) + "," + string(size(string(int(payload.b)))) + ":" + string(int(payload.b))`,
			Window: &v1.Window{Type: v1.WindowTumbling, Size: dur(time.Hour)},
			Aggregate: []v1.Aggregate{{Name: "total", Fn: v1.FnSum, Of: "double(payload.x)"},
				{Name: "first", Fn: v1.FnFirst, Of: "string(payload.a)"}, {Name: "first_2", Fn: v1.FnFirst, Of: "int(payload.b)"}},
			Project: `{"a": first, "b": first_2, "total": total}`,
		},
	}, {
		name: "an aggregate only in HAVING is computed but not emitted; a repeated one is computed once",
		sql:  `SELECT count(*) AS n, sum((payload->>'x')::numeric) / count(*) AS mean FROM q GROUP BY TUMBLE(created_at, INTERVAL '1 minute') HAVING max((payload->>'x')::numeric) > 10.5 AND partition = 'p0'`,
		want: v1.Pipeline{
			Window: &v1.Window{Type: v1.WindowTumbling, Size: dur(time.Minute)},
			Aggregate: []v1.Aggregate{{Name: "n", Fn: v1.FnCount}, {Name: "sum", Fn: v1.FnSum, Of: "double(payload.x)"},
				{Name: "max", Fn: v1.FnMax, Of: "double(payload.x)"}},
			Having:  `max > 10.5 && partition == "p0"`,
			Project: `{"n": n, "mean": sum / double(n)}`,
		},
	}, {
		name: "operators and functions map to CEL",
		sql: `SELECT * FROM q WHERE (payload->>'n')::numeric * 2 BETWEEN 1 AND 10 OR payload->>'s' IN ('a', 'b') OR NOT payload->>'s' LIKE 'x_%'
		      OR starts_with(payload->>'s', 'ab') OR length(payload->>'s') <> 3 OR payload->>'s' ~* '^z' OR payload->'o'->>'k' IS NULL
		      OR CASE WHEN payload->>'s' = 'c' THEN true ELSE false END OR (payload->>'s' || 'x') = 'yx'`,
		want: v1.Pipeline{Filter: `double(payload.n) * 2.0 >= 1 && double(payload.n) * 2.0 <= 10 || string(payload.s) in ["a", "b"] || !string(payload.s).matches("^x(?s:.)(?s:.*)$")` +
			` || string(payload.s).startsWith("ab") || size(string(payload.s)) != 3 || string(payload.s).matches("(?i)" + "^z")` +
			` || !("k" in payload.o) || payload.o.k == null || (string(payload.s) == "c" ? true : false) || string(payload.s) + "x" == "yx"`},
	}, {
		name: "a stateless query projects each event; names that are not CEL identifiers are indexed",
		sql:  `SELECT payload->>'order-id' AS id, o.partition, created_at, to_timestamp((payload->>'sec')::bigint) AS at FROM orders AS o WHERE o.payload->>'in' <> ''`,
		want: v1.Pipeline{Filter: `string(payload["in"]) != ""`,
			Project: `{"id": string(payload["order-id"]), "partition": partition, "created_at": createdAt, "at": timestamp(int(int(payload.sec)))}`},
	}, {
		name: "SELECT * is each event's payload",
		sql:  `SELECT * FROM q`,
		want: v1.Pipeline{},
	}, {
		name: "a window without aggregates still counts, unseen",
		sql:  `SELECT payload->>'k' AS k, window_end FROM q GROUP BY payload->>'k', TUMBLE(created_at, INTERVAL '5 min')`,
		want: v1.Pipeline{KeyBy: "string(payload.k)", Window: &v1.Window{Type: v1.WindowTumbling, Size: dur(5 * time.Minute)},
			Aggregate: []v1.Aggregate{{Name: "count", Fn: v1.FnCount}}, Project: `{"k": key, "window_end": windowEnd}`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Compile(tc.sql)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.source; want != "" && q.Source != want {
				t.Errorf("source %q, want %q", q.Source, want)
			}
			got, _ := json.MarshalIndent(q.Pipeline, "", "  ")
			want, _ := json.MarshalIndent(tc.want, "", "  ")
			if string(got) != string(want) {
				t.Errorf("pipeline\n%s\nwant\n%s", got, want)
			}
			if q.Program.Hash != tc.want.ConfigHash() {
				t.Errorf("program hash %s, want the pipeline's %s", q.Program.Hash, tc.want.ConfigHash())
			}
		})
	}
}

func TestAQueryOutsideTheSubsetIsRefusedNamingTheClauseAndWhatIsSupported(t *testing.T) {
	const win = ` GROUP BY TUMBLE(created_at, INTERVAL '1 minute')`
	for _, tc := range []struct{ sql, want string }{
		{`SELEC 1`, `SQL: syntax error at or near "SELEC"`},
		{`SELECT 1; SELECT 2`, "SQL: 2 statements; write exactly one SELECT"},
		{`INSERT INTO q VALUES (1)`, "SQL: only a SELECT is supported"},
		{`SELECT * FROM a JOIN b ON true`, "FROM: JOIN is not supported"},
		{`SELECT * FROM a, b`, "FROM: 2 sources; name exactly one queue (joins are not supported)"},
		{`SELECT * FROM (SELECT * FROM a) s`, "FROM: subqueries are not supported"},
		{`SELECT 1`, "FROM: 0 sources"},
		{`SELECT * FROM generate_series(1, 3)`, "FROM: name one queue"},
		{`SELECT * FROM public.orders`, `FROM: "public.orders" is a qualified name; a queue name with dots is quoted`},
		{`SELECT * FROM q WHERE payload->>'a' IN (SELECT 1)`, "WHERE: a subquery is not supported"},
		{`SELECT * FROM q WHERE EXISTS (SELECT 1)`, "WHERE: a subquery is not supported"},
		{`SELECT * FROM q ORDER BY created_at`, "ORDER BY: not supported"},
		{`SELECT * FROM q LIMIT 10`, "LIMIT/OFFSET: not supported"},
		{`SELECT DISTINCT payload FROM q`, "SELECT DISTINCT: not supported"},
		{`SELECT * FROM a UNION SELECT * FROM b`, "SQL: UNION, INTERSECT and EXCEPT are not supported"},
		{`WITH x AS (SELECT 1) SELECT * FROM q`, "SQL: WITH is not supported"},
		{`SELECT count(*) OVER () AS n FROM q`, "SELECT: window functions (OVER) are not supported: group by TUMBLE, HOP or SESSION"},
		{`SELECT row_number() OVER (ORDER BY created_at) AS n FROM q`, "SELECT: window functions (OVER) are not supported"},
		{`SELECT lower(payload->>'a') AS a FROM q`, "SELECT: unknown function lower(): the aggregates are count(*), sum, min, max, avg, first and last; the window functions TUMBLE, HOP and SESSION (in GROUP BY); the functions"},
		{`SELECT median((payload->>'a')::numeric) AS m FROM q` + win, "SELECT: unknown function median()"},
		{`SELECT count(*) FROM q`, "SELECT: the aggregate count() is only for SELECT and HAVING of a query with GROUP BY"},
		{`SELECT count(*) FROM q GROUP BY payload->>'k'`, "GROUP BY: needs a window: TUMBLE(time, size), HOP(time, slide, size) or SESSION(time, gap)"},
		{`SELECT count(*) FROM q GROUP BY TUMBLE(created_at, INTERVAL '1m'), SESSION(created_at, INTERVAL '1m')`, "GROUP BY: two window functions"},
		{`SELECT payload->>'a' AS a, count(*) FROM q GROUP BY 1, TUMBLE(created_at, INTERVAL '1m')`, "GROUP BY: GROUP BY a constant or a column's position is not supported"},
		{`SELECT count(*) FROM q GROUP BY ROLLUP (payload->>'a'), TUMBLE(created_at, INTERVAL '1m')`, "GROUP BY: GROUPING SETS, ROLLUP and CUBE are not supported"},
		{`SELECT count(*) FROM q GROUP BY TUMBLE(created_at, (payload->>'s')::interval)`, "GROUP BY TUMBLE: size must be a constant interval, such as INTERVAL '1 minute'"},
		{`SELECT count(*) FROM q GROUP BY TUMBLE(created_at, INTERVAL '1 month')`, `GROUP BY TUMBLE: size: INTERVAL "1 month" is not a fixed length of time`},
		{`SELECT count(*) FROM q GROUP BY TUMBLE(created_at)`, "GROUP BY TUMBLE: TUMBLE(time, size) takes (time, size), then optionally lateness => INTERVAL"},
		{`SELECT count(*) FROM q GROUP BY HOP(created_at, INTERVAL '7s', INTERVAL '1m')`, "GROUP BY HOP: window: size 1m0s is not a multiple of slide 7s"},
		{`SELECT count(*) FROM q GROUP BY TUMBLE(created_at, INTERVAL '1m', grace => INTERVAL '1s')`, "GROUP BY TUMBLE: unknown argument grace: the named arguments are lateness, idle_flush and late"},
		{`SELECT count(*) FROM q GROUP BY TUMBLE(created_at, INTERVAL '1m', late => 'no/such')`, `GROUP BY TUMBLE: late: "no/such" is neither drop nor a queue name`},
		{`SELECT count(DISTINCT payload->>'u') AS n FROM q` + win, "SELECT: count(DISTINCT …) is not supported"},
		{`SELECT count(payload->>'u') AS n FROM q` + win, "SELECT: count(expression) is not supported: count(*) counts a window's events"},
		{`SELECT sum((payload->>'a')::numeric) FILTER (WHERE true) AS n FROM q` + win, "SELECT: sum(…) FILTER (WHERE …) is not supported"},
		{`SELECT payload->>'a' AS a, count(*) FROM q` + win, "SELECT: payload is neither a GROUP BY key nor inside an aggregate"},
		{`SELECT * FROM q` + win, "SELECT: * is not supported with GROUP BY"},
		{`SELECT * FROM q WHERE window_start > created_at`, "WHERE: window_start is a window's: it is for SELECT and HAVING of a query with GROUP BY"},
		{`SELECT * FROM q WHERE nope = 1`, `WHERE: unknown column "nope": an event has payload, partition, transaction_id and created_at`},
		{`SELECT * FROM q WHERE count(*) > 1`, "WHERE: the aggregate count() is only for SELECT and HAVING"},
		{`SELECT * FROM q HAVING true`, "HAVING: needs GROUP BY with a window"},
		{`SELECT (payload->>'a')::numeric + 1 FROM q`, "SELECT: name each computed column with AS"},
		{`SELECT payload->>'a' AS x, payload->>'b' AS x FROM q`, `SELECT: two columns are named "x"`},
		{`SELECT * FROM q WHERE (payload->>'a')::jsonb IS NULL`, "WHERE: a cast to jsonb is not supported: cast to numeric, float8, int, bigint, text, boolean or timestamptz"},
		{`SELECT * FROM q WHERE COALESCE(payload->>'a', '') = ''`, "WHERE: COALESCE is not supported"},
		{`SELECT * FROM q WHERE payload->>'a' = $1`, "WHERE: a parameter ($n) is not supported"},
		{`SELECT * FROM q WHERE payload->>'a' = 1`, `WHERE: ERROR: <input>:1:19: found no matching overload for '_==_' applied to '(string, int)'`},
		{`SELECT sum(payload->>'a') AS s FROM q` + win, `SELECT sum(…): "string(payload.a)" has type string, want int or uint or double`},
		{`SELECT TUMBLE(created_at, INTERVAL '1m') AS t FROM q`, "SELECT: TUMBLE is a window: it goes in GROUP BY"},
		{`SELECT * FROM q FOR UPDATE`, "SQL: FOR UPDATE/SHARE is not supported"},
		{`SELECT * INTO t FROM q`, "SQL: SELECT INTO is not supported"},
		{strings.Repeat(" ", MaxLength+1), "the query is 16385 bytes long; at most 16384 are accepted"},
	} {
		t.Run(tc.sql, func(t *testing.T) {
			_, err := Compile(tc.sql)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v\nwant one starting %q", err, tc.want)
			}
		})
	}
}
