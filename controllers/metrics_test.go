package controllers_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/test/brokertest"
)

// querySeries returns the series of the metric for one StreamQuery, by
// tenant label.
func querySeries(t *testing.T, name, ns, query string) map[string]float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			if hasLabel(m, "namespace", ns) && hasLabel(m, "name", query) {
				for _, l := range m.Label {
					if l.GetName() == "tenant" {
						out[l.GetValue()] = m.Gauge.GetValue()
					}
				}
			}
		}
	}
	return out
}

// waitSeries waits until want holds for the StreamQuery's series.
func waitSeries(t *testing.T, name, ns, query string, want func(map[string]float64) bool) {
	t.Helper()
	brokertest.Eventually(t, wait, func() error {
		if got := querySeries(t, name, ns, query); !want(got) {
			return fmt.Errorf("%s of %s/%s is %v", name, ns, query, got)
		}
		return nil
	})
}

func only(tenant string, v float64) func(map[string]float64) bool {
	return func(s map[string]float64) bool { return len(s) == 1 && s[tenant] == v }
}

func none(s map[string]float64) bool { return len(s) == 0 }

func TestStreamQueryMetricsCarryItsStatusAndGoWhenItIsDeleted(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("metrics-on"))
	h.startOperator(operatorOpts{})
	ns := h.namespace(h.tenant("metrics-on"))
	h.grant(h.tenant("metrics-on-2"))
	q := h.reason(h.query(ns, "clicks"), v1.ReasonRegistered)
	waitSeries(t, "regent_streamquery_ready", ns, "clicks", only(h.tenant("metrics-on"), 1))
	waitSeries(t, "regent_streamquery_lag", ns, "clicks", only(h.tenant("metrics-on"), float64(*q.Status.Lag)))
	waitSeries(t, "regent_streamquery_state_rows", ns, "clicks", only(h.tenant("metrics-on"), float64(*q.Status.StateRows)))

	// A query its tenant's quota refuses is not Ready and has no figures.
	denied := h.reason(h.query(h.namespace(h.tenant("metrics-refused")), "views"), v1.ReasonQuotaDenied)
	waitSeries(t, "regent_streamquery_ready", denied.Namespace, "views", only(h.tenant("metrics-refused"), 0))
	waitSeries(t, "regent_streamquery_lag", denied.Namespace, "views", none)

	// Moved to another tenant, its series move with it.
	var n corev1.Namespace
	n.Name = ns
	edit(h, &n, func(n *corev1.Namespace) { n.Labels[v1.TenantLabel] = h.tenant("metrics-on-2") })
	eventually(h, q, "registered for metrics-on-2", func(q *v1.StreamQuery) bool { return q.Status.Tenant == h.tenant("metrics-on-2") })
	waitSeries(t, "regent_streamquery_ready", ns, "clicks", only(h.tenant("metrics-on-2"), 1))

	h.delete(q)
	h.gone(q)
	for _, m := range []string{"regent_streamquery_ready", "regent_streamquery_lag", "regent_streamquery_state_rows"} {
		waitSeries(t, m, ns, "clicks", none)
	}
}
