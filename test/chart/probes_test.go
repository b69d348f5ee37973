package chart_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/regent-mq/regent/test/chart"
)

// Liveness asks the process (the metrics listener), never the database:
// /health answers 503 while PostgreSQL is away, and a restart cures no
// database outage. /ready is readiness (it fails while the database is
// away, and from SIGTERM on, while the broker serves on for its drain
// grace), and a pod's time to stop covers the preStop sleep, the drain
// grace and the shutdown grace.
func TestBrokerLivenessIsTheMetricsListenerReadinessIsReadyAndItsGracesFitTheTermination(t *testing.T) {
	broker := deployment(t, chart.Template(t), chart.Broker)
	c := container(t, broker, "broker")
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/metrics" || p.HTTPGet.Port.StrVal != "metrics" {
		t.Errorf("liveness probe %+v, want GET /metrics on port metrics", p)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ready" || p.HTTPGet.Port.StrVal != "http" {
		t.Errorf("readiness probe %+v, want GET /ready on port http", p)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("the broker has no preStop sleep")
	}
	e := env(c)
	drain, err := time.ParseDuration(e["REGENT_DRAIN_GRACE"].Value)
	if err != nil {
		t.Fatalf("REGENT_DRAIN_GRACE: %v", err)
	}
	shutdown, err := time.ParseDuration(e["REGENT_SHUTDOWN_GRACE"].Value)
	if err != nil {
		t.Fatalf("REGENT_SHUTDOWN_GRACE: %v", err)
	}
	stop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second + drain + shutdown
	if grace := time.Duration(*broker.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second; stop >= grace {
		t.Errorf("preStop sleep + drain grace + shutdown grace = %v, not below terminationGracePeriodSeconds (%v): the kubelet would kill the broker mid-drain", stop, grace)
	}
	if got := chart.Template(t, "--set", "broker.drainGrace=9s"); env(container(t, deployment(t, got, chart.Broker), "broker"))["REGENT_DRAIN_GRACE"].Value != "9s" {
		t.Error("broker.drainGrace does not reach REGENT_DRAIN_GRACE")
	}
}

// queue-admin-api.md §10: the metrics name every tenant's queues, so they
// are served on a port of their own, which the ServiceMonitor scrapes and
// the tenant-facing Service does not expose.
func TestTheServiceMonitorScrapesTheMetricsPortThatTheTenantFacingServiceDoesNotExpose(t *testing.T) {
	objs := chart.Template(t, chart.Set(t, "observability").Args()...)
	c := container(t, deployment(t, objs, chart.Broker), "broker")
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 6633 || env(c)["REGENT_METRICS_LISTEN"].Value != ":6633" {
		t.Errorf("the broker's ports %v, REGENT_METRICS_LISTEN %q: want the metrics on 6633", ports, env(c)["REGENT_METRICS_LISTEN"].Value)
	}
	var api corev1.Service
	chart.Into(t, objs.Find(t, "Service", chart.Broker), &api)
	for _, p := range api.Spec.Ports {
		if p.TargetPort.StrVal != "http" {
			t.Errorf("the tenant-facing Service exposes port %s (%s)", p.Name, p.TargetPort.String())
		}
	}
	var metrics corev1.Service
	chart.Into(t, objs.Find(t, "Service", chart.Broker+"-metrics"), &metrics)
	if len(metrics.Spec.Ports) != 1 || metrics.Spec.Ports[0].TargetPort.StrVal != "metrics" {
		t.Errorf("the broker's metrics Service ports %+v, want only the metrics port", metrics.Spec.Ports)
	}
	// Prometheus names a ServiceMonitor's job after the Service it scrapes.
	rule, err := json.Marshal(objs.Find(t, "PrometheusRule", chart.Release).Object)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rule), `job=\"`+chart.Broker+`-metrics\"`) || strings.Contains(string(rule), `job=\"`+chart.Broker+`\"`) {
		t.Errorf("the alert rules do not select the broker's job by its metrics Service, %s-metrics", chart.Broker)
	}
	sm := objs.Find(t, "ServiceMonitor", chart.Broker)
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("the broker's ServiceMonitor endpoints %v, want port metrics", endpoints)
	}
}
