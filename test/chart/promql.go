package chart

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Observability is the value set that turns on the ServiceMonitors, the
// dashboards and the PrometheusRule.
const Observability = "observability"

// Expr is one PromQL expression the chart ships, and where it is.
type Expr struct {
	Where  string // e.g. "dashboards/broker.json: Messages pushed / s"
	PromQL string
}

// Dashboards are the chart's dashboard files, decoded, by file name.
func Dashboards(t testing.TB) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(Dir(), "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards under %s/dashboards (%v)", Dir(), err)
	}
	out := map[string]map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s is not valid JSON: %v", f, err)
		}
		out[filepath.Base(f)] = d
	}
	return out
}

// grafanaVar matches Grafana's template variables: $name, ${name}, ${name:fmt}.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)(:\w+)?\}?`)

// labelValues matches a query variable's label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`)

// Expressions lists every PromQL expression of the dashboards (panel targets
// and query variables) and of the PrometheusRule the observability value set
// renders. Grafana's variables are replaced as Grafana would before sending
// the query: intervals by a duration, the others by a value.
func Expressions(t testing.TB) []Expr {
	t.Helper()
	var out []Expr
	boards := Dashboards(t)
	for _, name := range slices.Sorted(maps.Keys(boards)) {
		d := boards[name]
		vars, _ := d["templating"].(map[string]any)["list"].([]any)
		for _, v := range vars {
			v := v.(map[string]any)
			if v["type"] != "query" {
				continue
			}
			q, _ := v["query"].(map[string]any)["query"].(string)
			m := labelValues.FindStringSubmatch(q)
			if m == nil {
				t.Fatalf("%s: variable %v: query %q is not label_values(selector, label)", name, v["name"], q)
			}
			out = append(out, Expr{Where: fmt.Sprintf("dashboards/%s: variable %v", name, v["name"]), PromQL: m[1]})
		}
		panels, _ := d["panels"].([]any)
		for _, p := range panels {
			p := p.(map[string]any)
			targets, _ := p["targets"].([]any)
			for _, tg := range targets {
				e, _ := tg.(map[string]any)["expr"].(string)
				out = append(out, Expr{Where: fmt.Sprintf("dashboards/%s: %v", name, p["title"]), PromQL: grafanaVar.ReplaceAllStringFunc(e, func(v string) string {
					if strings.Contains(v, "interval") || strings.Contains(v, "range") {
						return "5m"
					}
					return "x"
				})})
			}
		}
	}
	rules := Template(t, "--values", Set(t, Observability).File).Kind("PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("the %s value set renders %d PrometheusRules, want 1", Observability, len(rules))
	}
	groups, _, _ := unstructured.NestedSlice(rules[0].Object, "spec", "groups")
	for _, g := range groups {
		g := g.(map[string]any)
		for _, r := range g["rules"].([]any) {
			r := r.(map[string]any)
			out = append(out, Expr{Where: fmt.Sprintf("PrometheusRule %v/%v", g["name"], r["alert"]), PromQL: r["expr"].(string)})
		}
	}
	return out
}

// Metrics parses e and returns the metric names it selects.
func (e Expr) Metrics() ([]string, error) {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(e.PromQL)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					names = append(names, m.Value)
				}
			}
		}
		return nil
	})
	if len(names) == 0 {
		return nil, fmt.Errorf("selects no metric by name")
	}
	return names, nil
}
