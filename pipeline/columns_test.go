package pipeline

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

func TestColumnsAreEveryOutputsMembersWithTheirTypesWhenKnownBeforeItRuns(t *testing.T) {
	win := &v1.Window{Type: v1.WindowTumbling, Size: &metav1.Duration{Duration: time.Minute}}
	aggs := []v1.Aggregate{{Name: "n", Fn: v1.FnCount}, {Name: "total", Fn: v1.FnSum, Of: "payload.x"},
		{Name: "opening", Fn: v1.FnFirst, Of: "payload.x"}}
	for _, c := range []struct {
		name string
		p    v1.Pipeline
		want []Column
	}{
		{"a window's plain output", v1.Pipeline{KeyBy: "payload.k", Window: win, Aggregate: aggs},
			[]Column{{"key", KindString}, {"windowStart", KindTimestamp}, {"windowEnd", KindTimestamp}, {"n", KindInt},
				{"total", KindDouble}, {"opening", KindDyn}}},
		{"a window's project, a map literal", v1.Pipeline{KeyBy: "payload.k", Window: win, Aggregate: aggs,
			Project: `{"region": key, "minute": windowStart, "orders": n, "big": n > 2, "half": total / 2.0, "o": opening}`},
			[]Column{{"region", KindString}, {"minute", KindTimestamp}, {"orders", KindInt}, {"big", KindBool},
				{"half", KindDouble}, {"o", KindDyn}}},
		{"a stateless project", v1.Pipeline{Project: `{"who": payload.user, "p": partition}`},
			[]Column{{"who", KindDyn}, {"p", KindString}}},
		{"a stateless event as it came", v1.Pipeline{Filter: "payload.x > 1"}, nil},
		{"a project that is not a literal", v1.Pipeline{Project: `payload.m`}, nil},
	} {
		prog, err := Compile(c.p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, known := prog.Columns()
		if known != (c.want != nil) || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: columns %v (known %v), want %v", c.name, got, known, c.want)
		}
	}
}
