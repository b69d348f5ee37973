package controllers_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

func revenuePipeline(q *v1.StreamQuery) {
	q.Spec.ConfigHash = ""
	q.Spec.Pipeline = &v1.Pipeline{KeyBy: "payload.customer", Filter: "payload.amount > 0",
		Window:    &v1.Window{Type: v1.WindowTumbling, Size: &metav1.Duration{Duration: time.Minute}},
		Aggregate: []v1.Aggregate{{Name: "revenue", Fn: v1.FnSum, Of: "payload.amount"}}}
}

func TestAQueryWithAPipelineAndNoConfigHashRegistersThePipelinesHash(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	h.startOperator(operatorOpts{})
	q := h.reason(h.query(h.namespace(h.tenant("acme")), "revenue", revenuePipeline), v1.ReasonRegistered)
	want := q.Spec.Pipeline.ConfigHash()
	if row, ok := h.registration(h.tenant("acme"), "revenue"); !ok || row.Hash != want || q.Status.RegisteredHash != want {
		t.Fatalf("registration %+v (%v), status hash %q; want the pipeline's %q", row, ok, q.Status.RegisteredHash, want)
	}
}

func TestChangingOneExpressionOfThePipelineIsAConfigChange(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	h.startOperator(operatorOpts{})
	q := h.reason(h.query(h.namespace(h.tenant("acme")), "revenue", revenuePipeline), v1.ReasonRegistered)
	before := q.Status.RegisteredHash
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Pipeline.Filter = "payload.amount > 1" })
	q = h.reason(q, v1.ReasonConfigConflict)
	if row, _ := h.registration(h.tenant("acme"), "revenue"); row.Hash != before {
		t.Fatalf("registered hash %q, want %q left alone under Block", row.Hash, before)
	}
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.OnConfigChange = v1.OnConfigChangeReset })
	q = h.reason(q, v1.ReasonRegistered)
	if want := q.Spec.Pipeline.ConfigHash(); q.Status.RegisteredHash != want || q.Status.LastResetHash != want {
		t.Fatalf("registered %q, last reset %q; want the new pipeline's %q", q.Status.RegisteredHash, q.Status.LastResetHash, want)
	}
}

// pipelineInvalid creates acme's query revenue, edited, and waits for it
// to be PipelineInvalid with a message that contains want.
func pipelineInvalid(t *testing.T, want string, edit ...func(*v1.StreamQuery)) (*harness, *v1.StreamQuery) {
	t.Helper()
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	h.startOperator(operatorOpts{})
	q := h.reason(h.query(h.namespace(h.tenant("acme")), "revenue", edit...), v1.ReasonPipelineInvalid)
	if m := message(q.Status.Conditions); !strings.Contains(m, want) {
		t.Fatalf("message %q, want one that says %q", m, want)
	}
	return h, q
}

func TestAnInvalidExpressionIsPipelineInvalidWithTheCompilersMessageAndNothingIsRegistered(t *testing.T) {
	h, q := pipelineInvalid(t, "spec.pipeline: filter: ERROR: <input>:1:17: Syntax error", revenuePipeline, func(q *v1.StreamQuery) {
		q.Spec.Pipeline.Filter = "payload.amount >"
	})
	h.wantEvent(q, v1.ReasonPipelineInvalid, "Syntax error")
	if _, ok := h.registration(h.tenant("acme"), "revenue"); ok {
		t.Fatal("an invalid pipeline was registered")
	}
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.Pipeline.Filter = "payload.amount > 0" })
	h.reason(q, v1.ReasonRegistered)
}

func TestAConfigHashThatIsNotThePipelinesIsPipelineInvalid(t *testing.T) {
	pipelineInvalid(t, `spec.configHash "h1" is not the pipeline's config hash`, revenuePipeline, func(q *v1.StreamQuery) {
		q.Spec.ConfigHash = "h1"
	})
}
