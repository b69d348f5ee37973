package sqlquery

import (
	"testing"

	"github.com/regent-mq/regent/pipeline"
)

// FuzzCompile: any text is refused with an error or compiles to a pipeline
// that package pipeline accepts, under the hash it reports; never a panic.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`SELECT payload->>'region' AS region, count(*) AS n, window_start FROM orders WHERE payload->>'s' = 'paid' GROUP BY payload->>'region', TUMBLE((payload->>'ts')::timestamptz, INTERVAL '1 minute') HAVING count(*) > 2`,
		`SELECT count(*), avg((payload->>'n')::numeric) FROM q GROUP BY HOP(created_at, INTERVAL '10s', INTERVAL '1' MINUTE)`,
		`SELECT payload->>'u' AS u, first(payload->'a'->0) AS f FROM q GROUP BY payload->>'u', (payload->>'v')::int, SESSION(created_at, INTERVAL '30s', lateness => INTERVAL '5s', late => 'l')`,
		`SELECT * FROM q WHERE payload->>'a' LIKE 'x\_%' OR payload->'b' IS NULL OR CASE payload->>'c' WHEN 'd' THEN true END`,
		`SELECT payload->>'a' AS "we""ird", -((payload->>'n')::int) % 3 AS m FROM "a.b-c" AS x WHERE x.payload->>'n' NOT IN ('1') AND NOT (payload->>'z' ~ 'q')`,
		`SELECT * FROM a JOIN b ON true ORDER BY 1 LIMIT 2`,
	} {
		f.Add(s)
	}
	// The first parse loads the parser, which takes longer than the
	// fuzzing engine lets one input run before it calls the worker hung.
	if _, err := Compile("SELECT * FROM q"); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		q, err := Compile(sql)
		if err != nil {
			if q != nil {
				t.Fatalf("an error and a query: %v", err)
			}
			return
		}
		p, err := pipeline.Compile(q.Pipeline)
		if err != nil {
			t.Fatalf("compiled to a pipeline that does not compile: %v\n%+v", err, q.Pipeline)
		}
		if p.Hash != q.Program.Hash || p.Hash != q.Pipeline.ConfigHash() {
			t.Fatalf("hash %s, program %s, pipeline %s", p.Hash, q.Program.Hash, q.Pipeline.ConfigHash())
		}
	})
}
