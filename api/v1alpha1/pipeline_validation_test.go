package v1alpha1_test

import (
	"strings"
	"testing"
)

// The pipeline rules the CRD states, each with a manifest that breaks it.

const orders = `pipeline:
    keyBy: "payload.customer"
    window: {type: Tumbling, size: 60s}
    aggregate: [{name: orders, fn: count}]`

const sink = "sinkQueue: orders.out"

func TestAPipelineQueryNeedsNoConfigHash(t *testing.T) {
	if err := create(t, query(t, "pipeline-only", source, sink, orders)); err != nil {
		t.Fatal(err)
	}
}

func TestAPipelineNeedsASinkQueue(t *testing.T) {
	rejected(t, create(t, query(t, "no-sink", source, orders)), "a pipeline needs sinkQueue")
}

func TestWorkersNeedAPipeline(t *testing.T) {
	rejected(t, create(t, query(t, "workers-only", source, sink, hash, "workers: {replicas: 2}")), "spec.workers needs spec.pipeline")
	rejected(t, create(t, query(t, "negative", source, sink, orders, "workers: {replicas: -1}")), "spec.workers.replicas")
	if err := create(t, query(t, "with-workers", source, sink, orders, "workers: {replicas: 0, image: w:1, resources: {limits: {memory: 64Mi}}}")); err != nil {
		t.Fatal(err)
	}
}

func TestAStreamQueryWithAPipelineHasANameOfAtMost63Characters(t *testing.T) {
	long := "q" + strings.Repeat("x", 63)
	rejected(t, create(t, query(t, long, source, sink, orders)), "at most 63 characters")
	if err := create(t, query(t, long, source, hash)); err != nil {
		t.Fatalf("a long name without a pipeline: %v", err)
	}
}

func TestWindowRulesAreTheCRDs(t *testing.T) {
	for _, c := range []struct{ window, want string }{
		{"{type: Tumbling}", "Tumbling and Sliding windows need size"},
		{"{type: Sliding, size: 60s}", "a Sliding window needs slide"},
		{"{type: Session}", "a Session window needs gap"},
		{"{type: Tumbling, size: 60s, gap: 5s}", "gap is for Session windows only"},
		{"{type: Tumbling, size: 60s, slide: 5s}", "slide is for Sliding windows only"},
		{"{type: Session, gap: 5s, size: 60s}", "size is for Tumbling and Sliding windows only"},
		{"{type: Hopping, size: 60s}", `Unsupported value: "Hopping"`},
	} {
		rejected(t, create(t, query(t, "window", source, "pipeline:", "  window: "+c.window, "  aggregate: [{name: total, fn: count}]")), c.want)
	}
}

func TestAggregateRulesAreTheCRDs(t *testing.T) {
	for _, c := range []struct{ aggregate, want string }{
		{"[{name: total, fn: count, of: payload.x}]", "of is required for every fn but count"},
		{"[{name: total, fn: sum}]", "of is required for every fn but count"},
		{"[{name: key, fn: count}]", "an aggregate may not be named key"},
		{"[{name: 2x, fn: count}]", "spec.pipeline.aggregate[0].name"},
		{"[{name: total, fn: median, of: payload.x}]", `Unsupported value: "median"`},
		{"[{name: total, fn: count}, {name: total, fn: count}]", "Duplicate value"},
		{"[]", "a window needs at least one aggregate"},
	} {
		rejected(t, create(t, query(t, "aggregate", source, "pipeline:", "  window: {type: Tumbling, size: 60s}", "  aggregate: "+c.aggregate)), c.want)
	}
}

func TestAggregatesAndHavingNeedAWindow(t *testing.T) {
	rejected(t, create(t, query(t, "stateless", source, "pipeline:", "  aggregate: [{name: total, fn: count}]")), "aggregate needs a window")
	rejected(t, create(t, query(t, "stateless", source, "pipeline:", "  having: 'total > 1'")), "having needs a window")
	rejected(t, create(t, query(t, "stateless", source, "pipeline:", "  late: 'no queue'")), "spec.pipeline.late")
}

const ordersSQL = `sql: "SELECT count(*) FROM orders GROUP BY TUMBLE(created_at, INTERVAL '1 minute')"`

func TestASQLQueryNeedsNoConfigHashButASinkQueue(t *testing.T) {
	if err := create(t, query(t, "sql-only", source, sink, ordersSQL)); err != nil {
		t.Fatal(err)
	}
	rejected(t, create(t, query(t, "sql-no-sink", source, ordersSQL)), "a pipeline needs sinkQueue")
	if err := create(t, query(t, "sql-workers", source, sink, ordersSQL, "workers: {replicas: 2}")); err != nil {
		t.Fatal(err)
	}
}

func TestPipelineAndSQLAreExclusive(t *testing.T) {
	rejected(t, create(t, query(t, "both", source, sink, orders, ordersSQL)), "pipeline and sql are two ways to write one pipeline: set one of them")
}
