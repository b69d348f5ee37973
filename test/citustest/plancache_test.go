package citustest_test

import (
	"context"
	"testing"

	"github.com/regent-mq/regent/test/citustest"
)

// Citus 13.2.2 planned every statement that a delegated function ran on the
// worker owning its shard again at every call, and kept each plan on the
// prepared statement (citusdata/citus#8783): half a worker's CPU, and memory
// that grows with every call on a pooled connection. hack/citus.sh applies
// the fix (hack/citus/local-plan-cache.patch); this is what it restores: a
// session's memory stays flat over a thousand calls.
func TestRepeatedCallsOnTheOwningWorkerReuseTheirPlans(t *testing.T) {
	const partition, calls = 7, 1000
	ctx := context.Background()
	_, _, owner := distributedPushShape(t, partition)
	worker := connect(t, owner.URL(citustest.Database).String())
	call := func(n int) {
		for range n {
			if _, err := worker.Exec(ctx, "SELECT push($1, 'x')", partition); err != nil {
				t.Fatal(err)
			}
		}
	}
	memory := func() int64 {
		var bytes int64
		if err := worker.QueryRow(ctx, "SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts").Scan(&bytes); err != nil {
			t.Fatal(err)
		}
		return bytes
	}
	call(20) // past PL/pgSQL's custom plans, and Citus's first cached one
	before := memory()
	call(calls)
	// A kept plan of push's UPDATE or INSERT is several kilobytes.
	grown := memory() - before
	t.Logf("the worker's session grew by %d bytes over %d calls", grown, calls)
	if grown > 100*calls {
		t.Fatalf("the worker's session grew by %d bytes over %d calls (%d a call): it keeps a plan per call", grown, calls, grown/calls)
	}
}
