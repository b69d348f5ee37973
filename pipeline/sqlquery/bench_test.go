package sqlquery

import "testing"

// BenchmarkCompile is one query, parsed, translated and compiled to CEL
// programs, once the parser is loaded: what a reconcile of a StreamQuery
// with spec.sql spends on it.
func BenchmarkCompile(b *testing.B) {
	const sql = `SELECT payload->>'region' AS region, count(*) AS orders, sum((payload->>'amount')::numeric) AS revenue, window_start
		FROM orders WHERE payload->>'status' = 'paid'
		GROUP BY payload->>'region', TUMBLE((payload->>'ts')::timestamptz, INTERVAL '1 minute') HAVING count(*) > 2`
	if _, err := Compile(sql); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(sql); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse is PostgreSQL's parser alone, through WebAssembly.
func BenchmarkParse(b *testing.B) {
	const sql = `SELECT payload->>'region' AS region, count(*) AS orders FROM orders GROUP BY payload->>'region', TUMBLE(created_at, INTERVAL '1 minute')`
	if _, err := parse(sql); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parse(sql); err != nil {
			b.Fatal(err)
		}
	}
}
