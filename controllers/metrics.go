package controllers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// Registration results, the values of regent_operator_registrations_total's
// result label.
const (
	resultRegistered  = "registered"
	resultReset       = "reset"
	resultConflict    = "conflict"
	resultDenied      = "denied"
	resultUnavailable = "unavailable"
	resultInvalid     = "invalid"
)

var queryLabels = []string{"namespace", "name", "tenant"}

var (
	registrations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regent_operator_registrations_total",
		Help: "Registrations the operator sent to the broker, by result: registered, reset, conflict, denied, invalid (a table sink refused) or unavailable.",
	}, []string{"result"})
	quotaUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_tenantquota_registered_queries",
		Help: "Queries registered by a tenant that has a TenantQuota.",
	}, []string{"tenant"})
	quotaMax = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_tenantquota_max_queries",
		Help: "A tenant's TenantQuota cap on registered queries; absent when the quota has no cap.",
	}, []string{"tenant"})
	queryReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_streamquery_ready",
		Help: "1 when the StreamQuery's Ready condition is True, else 0.",
	}, queryLabels)
	queryLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_streamquery_lag",
		Help: "Messages of the StreamQuery's source queue its query has not consumed yet, as of the last resync (status.lag).",
	}, queryLabels)
	queryLagSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_streamquery_lag_seconds",
		Help: "Age of the oldest source message the StreamQuery's query has not consumed, 0 when none, as of the last resync (status.lagSeconds).",
	}, queryLabels)
	queryFresh = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_streamquery_fresh",
		Help: "1 while the StreamQuery's Fresh condition is True, 0 while it is False; absent without spec.freshness.",
	}, queryLabels)
	queryStateRows = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_streamquery_state_rows",
		Help: "State rows the StreamQuery's query holds, as of the last resync (status.stateRows).",
	}, queryLabels)
)

// The collectors live on controller-runtime's registry, which the manager
// serves on its metrics endpoint; registering once per process is what lets
// several managers (tests) share them.
func init() {
	metrics.Registry.MustRegister(registrations, quotaUsed, quotaMax, queryReady, queryLag, queryLagSeconds, queryStateRows, queryFresh)
}

// queryTenants remembers the tenant label each StreamQuery's series carry,
// so that a move to another tenant removes the old series instead of
// leaving them frozen beside the new ones.
var queryTenants sync.Map // types.NamespacedName -> string

// observeQuery exports the status the reconcile just settled.
func observeQuery(q *v1.StreamQuery) {
	key := types.NamespacedName{Namespace: q.Namespace, Name: q.Name}
	if old, ok := queryTenants.Swap(key, q.Status.Tenant); ok && old != q.Status.Tenant {
		deleteQuerySeries(key)
	}
	l := prometheus.Labels{"namespace": q.Namespace, "name": q.Name, "tenant": q.Status.Tenant}
	ready := 0.0
	if meta.IsStatusConditionTrue(q.Status.Conditions, v1.ConditionReady) {
		ready = 1
	}
	queryReady.With(l).Set(ready)
	for _, g := range []struct {
		vec *prometheus.GaugeVec
		v   *int64
	}{{queryLag, q.Status.Lag}, {queryLagSeconds, q.Status.LagSeconds}, {queryStateRows, q.Status.StateRows}} {
		if g.v == nil {
			g.vec.Delete(l) // a duplicate, or not registered yet: no figure to show
		} else {
			g.vec.With(l).Set(float64(*g.v))
		}
	}
	if c := meta.FindStatusCondition(q.Status.Conditions, v1.ConditionFresh); c == nil {
		queryFresh.Delete(l)
	} else if c.Status == metav1.ConditionTrue {
		queryFresh.With(l).Set(1)
	} else {
		queryFresh.With(l).Set(0)
	}
}

// forgetQuery removes the series of a StreamQuery that is gone.
func forgetQuery(key types.NamespacedName) {
	queryTenants.Delete(key)
	deleteQuerySeries(key)
}

func deleteQuerySeries(key types.NamespacedName) {
	l := prometheus.Labels{"namespace": key.Namespace, "name": key.Name}
	for _, vec := range []*prometheus.GaugeVec{queryReady, queryLag, queryLagSeconds, queryStateRows, queryFresh} {
		vec.DeletePartialMatch(l)
	}
}
