package fuzz_test

import (
	"net/url"
	"testing"
)

// analyticsRoutes are the read routes whose whole input is the query.
var analyticsRoutes = []string{"/api/v1/status/analytics", "/api/v1/analytics/queue-lag", "/api/v1/analytics/queue-ops",
	"/api/v1/analytics/queue-parked-replicas", "/api/v1/analytics/retention", "/api/v1/analytics/system-metrics",
	"/api/v1/analytics/worker-metrics", "/api/v1/analytics/postgres-stats", "/api/v1/traces/names",
	"/api/v1/analytics/group-lag", "/api/v1/analytics/query-cycles"}

func FuzzAnalytics(f *testing.F) {
	br := start(f)
	f.Add(uint8(0), "interval=minute&from=2026-05-06T00:00:00Z&to=2026-05-06T01:00:00Z&queue=q1")
	f.Add(uint8(2), "from=2026-05-06T12:00:00%2B02:00&hostname=x&workerId=z")
	f.Add(uint8(6), "from=bad&to=")
	f.Add(uint8(8), "limit=-1&offset=99999999999999999999")
	f.Fuzz(func(t *testing.T, route uint8, query string) {
		br.check(t, "GET", analyticsRoutes[int(route)%len(analyticsRoutes)], query, "")
	})
}

func FuzzTrace(f *testing.F) {
	br := start(f)
	f.Add(`{"transactionId":"t1","partitionId":"0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f","data":{},"traceNames":["a"]}`)
	f.Add(`{"transactionId":"t1","partitionId":"x","data":null,"traceNames":"a","eventType":5}`)
	f.Add(`{"transactionId":"t1","partitionId":"0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f","consumerGroup":"a\u0000b","data":{}}`)
	f.Fuzz(func(t *testing.T, body string) { br.check(t, "POST", "/api/v1/traces", "", body) })
}

func FuzzTraceRead(f *testing.F) {
	br := start(f)
	f.Add("0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f", "t1", "")
	f.Add("by-name", "a+b%2", "limit=x")
	f.Fuzz(func(t *testing.T, first, second, query string) {
		br.check(t, "GET", "/api/v1/traces/"+url.PathEscape(first)+"/"+url.PathEscape(second), query, "")
	})
}
