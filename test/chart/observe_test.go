package chart_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/regent-mq/regent/test/chart"
	"github.com/regent-mq/regent/test/kubetest"
)

func TestDashboardsAreValidJSONAndShippedAsSidecarConfigMaps(t *testing.T) {
	files := chart.Dashboards(t) // fails on a file that is not JSON
	maps := chart.Template(t, chart.Set(t, chart.Observability).Args()...).Kind("ConfigMap")
	if len(maps) != len(files) {
		t.Fatalf("%d dashboard ConfigMaps for %d dashboard files", len(maps), len(files))
	}
	for _, cm := range maps {
		if cm.GetLabels()["grafana_dashboard"] != "1" {
			t.Errorf("ConfigMap %s lacks the label grafana_dashboard: \"1\" the Grafana sidecar selects by", cm.GetName())
		}
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		for key, text := range data {
			var got map[string]any
			if err := json.Unmarshal([]byte(text), &got); err != nil {
				t.Fatalf("%s/%s is not JSON: %v", cm.GetName(), key, err)
			}
			file := strings.TrimPrefix(key, "regent-")
			if !reflect.DeepEqual(got, files[file]) {
				t.Errorf("%s/%s differs from dashboards/%s", cm.GetName(), key, file)
			}
		}
	}
	for name, d := range files {
		if d["uid"] == nil || d["title"] == nil || len(d["panels"].([]any)) == 0 {
			t.Errorf("dashboards/%s lacks a uid, a title or panels", name)
		}
	}
}

func TestDashboardsAreOffByDefault(t *testing.T) {
	objs := chart.Template(t)
	if n := len(objs.Kind("ConfigMap")) + len(objs.Kind("PrometheusRule")); n != 0 {
		t.Fatalf("the defaults render %d dashboard ConfigMaps or PrometheusRules:\n%s", n, objs)
	}
}

func TestEveryPromQLExpressionOfTheDashboardsAndRulesParses(t *testing.T) {
	exprs := chart.Expressions(t)
	if len(exprs) < 30 {
		t.Fatalf("only %d expressions found", len(exprs))
	}
	for _, e := range exprs {
		if _, err := e.Metrics(); err != nil {
			t.Errorf("%s: %v\n  %s", e.Where, err, e.PromQL)
		}
	}
	// The control: the parser refuses what Prometheus would refuse.
	bad := chart.Expr{PromQL: `sum by (queue) (rate(regent_messages_pushed_total[5m])`}
	if _, err := bad.Metrics(); err == nil {
		t.Fatal("an unbalanced expression parsed")
	}
}

func TestThePrometheusRulePassesServerSideDryRun(t *testing.T) {
	ns := namespace(t, nil)
	rule := chart.Template(t, append(chart.Set(t, chart.Observability).Args(), "--namespace", ns)...).Find(t, "PrometheusRule", chart.Release)
	bad := rule.DeepCopy()
	if err := dryRunApply(rule); err != nil {
		t.Fatal(err)
	}
	// The control: the CRD checks the rule's fields, so a wrong one is refused.
	groups, _, _ := unstructured.NestedSlice(bad.Object, "spec", "groups")
	groups[0].(map[string]any)["rules"].([]any)[0].(map[string]any)["for"] = "five minutes"
	if err := unstructured.SetNestedSlice(bad.Object, groups, "spec", "groups"); err != nil {
		t.Fatal(err)
	}
	if err := dryRunApply(bad); err == nil || !strings.Contains(err.Error(), "for") {
		t.Fatalf("a rule with for: \"five minutes\" was not refused: %v", err)
	}
}

func TestTheLagAlertTakesItsThresholdAndDurationFromTheValues(t *testing.T) {
	rule := chart.Template(t, chart.Set(t, chart.Observability).Args()...).Find(t, "PrometheusRule", chart.Release)
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			r := r.(map[string]any)
			if r["alert"] == "RegentStreamQueryLagging" {
				if !strings.HasSuffix(r["expr"].(string), "> 5000") || r["for"] != "30m" {
					t.Fatalf("RegentStreamQueryLagging: expr %q for %v, want > 5000 for 30m", r["expr"], r["for"])
				}
				return
			}
		}
	}
	t.Fatal("no RegentStreamQueryLagging alert")
}

func TestTheAlertsTheIssueAsksForAreThere(t *testing.T) {
	rule := chart.Template(t, chart.Set(t, chart.Observability).Args()...).Find(t, "PrometheusRule", chart.Release)
	got := map[string]bool{}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			got[r.(map[string]any)["alert"].(string)] = true
		}
	}
	for _, want := range []string{"RegentBrokerDown", "RegentDatabaseUnreachable", "RegentStreamQueryNotReady",
		"RegentStreamQueryLagging", "RegentStreamQueryNotFresh", "RegentDeadLettersGrowing", "RegentEncryptionFailures", "RegentJWKSFetchesFailing", "RegentBroker5xxRatio",
		"RegentStreamQueryCyclesRefused"} {
		if !got[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// The scaling samples live in a folder of their own: `kubectl apply -f
// config/samples/` (the README's tour) does not descend into it, and the
// tour's cluster has no KEDA.
func TestTheScalingSamplesPassServerSideDryRun(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(kubetest.RepoRoot(), "config", "samples", "scaling", "*.yaml"))
	if err != nil || len(files) != 2 {
		t.Fatalf("scaling samples %v (%v), want hpa and keda", files, err)
	}
	ns := namespace(t, nil)
	kinds := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := chart.Decode(string(raw))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, obj := range objs {
			kinds[obj.GetKind()] = true
			// The samples' namespace (acme-streams) need not exist here.
			obj.SetNamespace(ns)
			if err := dryRunApply(obj); err != nil {
				t.Errorf("%s: %s/%s: %v", filepath.Base(f), obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	for _, k := range []string{"HorizontalPodAutoscaler", "ScaledObject"} {
		if !kinds[k] {
			t.Errorf("no %s among the scaling samples", k)
		}
	}
}
