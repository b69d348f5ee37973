package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Registration results, the values of regent_operator_registrations_total's
// result label.
const (
	resultRegistered  = "registered"
	resultReset       = "reset"
	resultConflict    = "conflict"
	resultDenied      = "denied"
	resultUnavailable = "unavailable"
)

var (
	registrations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regent_operator_registrations_total",
		Help: "Registrations the operator sent to the broker, by result: registered, reset, conflict, denied or unavailable.",
	}, []string{"result"})
	quotaUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_tenant_quota_used",
		Help: "Queries registered by a tenant that has a TenantQuota.",
	}, []string{"tenant"})
	quotaMax = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "regent_tenant_quota_max",
		Help: "A tenant's TenantQuota cap on registered queries; absent when the quota has no cap.",
	}, []string{"tenant"})
)

// The collectors live on controller-runtime's registry, which the manager
// serves on its metrics endpoint; registering once per process is what lets
// several managers (tests) share them.
func init() {
	metrics.Registry.MustRegister(registrations, quotaUsed, quotaMax)
}
