package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The table sink rules the CRD states, each with a manifest that breaks it.

func TestATableSinkNeedsAPipeline(t *testing.T) {
	rejected(t, create(t, query(t, "sink-no-pipeline", source, hash, "sink: {table: t, mode: append}")),
		"spec.sink needs spec.pipeline or spec.sql")
}

func TestAPipelineMayWriteToATableSinkAloneOrBesideItsSinkQueue(t *testing.T) {
	if err := create(t, query(t, "table-only", source, orders, "sink: {table: per_minute, keyColumns: [key, windowStart]}")); err != nil {
		t.Fatal(err)
	}
	if err := create(t, query(t, "table-and-queue", source, sink, orders, "sink: {table: per_minute, mode: append}")); err != nil {
		t.Fatal(err)
	}
	var q v1.StreamQuery
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "table-only"}, &q); err != nil {
		t.Fatal(err)
	}
	if q.Spec.Sink.Mode != v1.TableSinkUpsert || q.Spec.Sink.CreateTable {
		t.Fatalf("sink %+v, want mode upsert by default and no createTable", q.Spec.Sink)
	}
}

func TestATableSinksRulesAreTheCRDs(t *testing.T) {
	for _, c := range []struct{ sink, want string }{
		{"{table: t}", "mode upsert needs keyColumns"},
		{"{table: t, mode: upsert, keyColumns: []}", "mode upsert needs keyColumns"},
		{"{table: t, mode: merge, keyColumns: [k]}", `spec.sink.mode: Unsupported value: "merge"`},
		{"{table: '', mode: append}", "spec.sink.table"},
		{"{table: " + strings.Repeat("t", 64) + ", mode: append}", "spec.sink.table: Too long"},
		{"{table: t, keyColumns: [k, k]}", "spec.sink.keyColumns[1]: Duplicate value"},
		{"{mode: append}", "spec.sink.table: Required value"},
	} {
		rejected(t, create(t, query(t, "bad-sink", source, orders, "sink: "+c.sink)), c.want)
	}
}
