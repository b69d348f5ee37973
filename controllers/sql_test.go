package controllers_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/pipeline"
	"github.com/regent-mq/regent/pipeline/sqlquery"
)

const revenueSQL = `SELECT payload->>'customer' AS customer, sum((payload->>'amount')::numeric) AS revenue, window_start
	FROM orders WHERE (payload->>'amount')::numeric > 0
	GROUP BY payload->>'customer', TUMBLE(created_at, INTERVAL '1 minute')`

func revenueInSQL(q *v1.StreamQuery) {
	q.Spec.ConfigHash = ""
	q.Spec.SQL = revenueSQL
}

func TestAQueryInSQLRegistersTheHashOfItsCompiledPipelineShownInStatusAndItsWorkersRunIt(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, revenueInSQL)
	want, err := sqlquery.Compile(revenueSQL)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Status.CompiledPipeline; got == nil || got.ConfigHash() != want.Program.Hash || got.KeyBy != want.Pipeline.KeyBy {
		t.Fatalf("status.compiledPipeline %+v, want %+v", got, want.Pipeline)
	}
	if row, ok := h.registration(h.tenant("acme"), "clicks"); !ok || row.Hash != want.Program.Hash || q.Status.RegisteredHash != want.Program.Hash {
		t.Fatalf("registration %+v (%v), status hash %q; want the compiled pipeline's %q", row, ok, q.Status.RegisteredHash, want.Program.Hash)
	}
	// The workers get the compiled pipeline: the worker computes the same
	// hash from their file, with no SQL parser involved.
	_, cm, _ := h.workers(q)
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["pipeline.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	if prog, err := pipeline.Load(file); err != nil || prog.Hash != want.Program.Hash {
		t.Fatalf("the ConfigMap's pipeline (%v) hashes to %v, want %q:\n%s", err, prog, want.Program.Hash, cm.Data["pipeline.yaml"])
	}
}

func TestAQueryInSQLOutsideTheSubsetIsPipelineInvalidNamingTheClauseAndNothingIsRegistered(t *testing.T) {
	h, q := pipelineInvalid(t, "spec.sql: ORDER BY: not supported", revenueInSQL, func(q *v1.StreamQuery) {
		q.Spec.SQL = revenueSQL + " ORDER BY 1"
	})
	h.wantEvent(q, v1.ReasonPipelineInvalid, "ORDER BY")
	if _, ok := h.registration(h.tenant("acme"), "revenue"); ok {
		t.Fatal("a query outside the subset was registered")
	}
	if q.Status.CompiledPipeline != nil {
		t.Fatalf("status.compiledPipeline %+v for a query that does not compile", q.Status.CompiledPipeline)
	}
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.SQL = revenueSQL })
	h.reason(q, v1.ReasonRegistered)
}

func TestAQueryInSQLThatReadsAnotherQueueThanSourceQueueIsPipelineInvalid(t *testing.T) {
	pipelineInvalid(t, `spec.sql: FROM "payments" is not spec.sourceQueue "orders"`, revenueInSQL, func(q *v1.StreamQuery) {
		q.Spec.SQL = strings.Replace(revenueSQL, "FROM orders", "FROM payments", 1)
	})
}
