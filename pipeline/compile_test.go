package pipeline

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

const ordersYAML = `
pipeline:
  filter: "payload.amount > 0"
  keyBy: "payload.customer"
  eventTime: "payload.ts"
  window:
    type: Tumbling
    size: 60s
  aggregate:
    - {name: orders, fn: count}
    - {name: revenue, fn: sum, of: "payload.amount"}
  having: "orders >= 2"
  project: "{'customer': key, 'revenue': revenue}"
`

func mustParse(t *testing.T, doc string) v1.Pipeline {
	t.Helper()
	p, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAFileMayHoldThePipelineOrATopLevelPipelineKeyInYAMLOrJSON(t *testing.T) {
	nested := mustParse(t, ordersYAML)
	bare := mustParse(t, strings.ReplaceAll(strings.TrimPrefix(ordersYAML, "\npipeline:"), "\n  ", "\n"))
	asJSON, _ := json.Marshal(map[string]any{"pipeline": nested})
	fromJSON := mustParse(t, string(asJSON))
	if nested.ConfigHash() != bare.ConfigHash() || nested.ConfigHash() != fromJSON.ConfigHash() || nested.Window == nil || nested.KeyBy != "payload.customer" {
		t.Fatalf("the three spellings differ: %+v / %+v / %+v", nested, bare, fromJSON)
	}
	if _, err := Parse([]byte("keyBy: payload.x\nfilterr: true\n")); err == nil || !strings.Contains(err.Error(), "filterr") {
		t.Fatalf("a misspelt field: %v, want an error naming it", err)
	}
}

func TestTheConfigHashComesFromTheCanonicalPipeline(t *testing.T) {
	a := mustParse(t, ordersYAML)
	b := mustParse(t, strings.Replace(ordersYAML, "size: 60s", "size: 1m\n    allowedLateness: 0s\n    idleFlush: 5s", 1))
	if a.ConfigHash() != b.ConfigHash() {
		t.Fatalf("60s with defaults absent and 1m with defaults spelt out hash differently: %s, %s", a.ConfigHash(), b.ConfigHash())
	}
	c := mustParse(t, strings.Replace(ordersYAML, "orders >= 2", "orders >= 3", 1))
	if a.ConfigHash() == c.ConfigHash() {
		t.Fatal("changing one expression kept the hash")
	}
	p, err := Compile(a)
	if err != nil {
		t.Fatal(err)
	}
	if p.Hash != a.ConfigHash() {
		t.Fatalf("the program's hash %s is not the pipeline's %s", p.Hash, a.ConfigHash())
	}
}

func TestAnInvalidExpressionIsRefusedWithTheCompilersMessage(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{`"payload.amount > 0"`, `"payload.amount >"`, "filter: ERROR: <input>:1:17: Syntax error"},
		{`"payload.customer"`, `"customer"`, "keyBy: ERROR: <input>:1:1: undeclared reference to 'customer'"},
		{`"payload.amount > 0"`, `"1 + 2"`, `filter: "1 + 2" has type int, want bool`},
		{`"orders >= 2"`, `"revenue + 'x'"`, "having: ERROR"},
		{`"{'customer': key, 'revenue': revenue}"`, `"[key]"`, "project: \"[key]\" has type list(string), want map(string, dyn)"},
		{`"payload.ts"`, `"'yesterday'"`, "eventTime: \"'yesterday'\" has type string"},
		{`fn: sum, of: "payload.amount"`, `fn: sum, of: "string(payload.amount)"`, "aggregate[1].of"},
		{"type: Tumbling", "type: Hopping", `window: type "Hopping" is not Tumbling, Sliding or Session`},
		{"{name: orders, fn: count}", "{name: key, fn: count}", `aggregate[0]: name "key" is reserved`},
	} {
		p := mustParse(t, strings.Replace(ordersYAML, c.from, c.to, 1))
		_, err := Compile(p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s -> %s: error %v, want it to contain %q", c.from, c.to, err, c.want)
		}
	}
}

func TestAnExpressionOverTheCostLimitFailsItsEventAndNotTheWorker(t *testing.T) {
	p, err := Compile(v1.Pipeline{Filter: "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, " +
		"[1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a+b+c+d+e+f > 0))))))"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.NewShard(Scope{Partition: "p"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.Fold([]Event{{Data: json.RawMessage(`{}`)}})
	if s.Failed != 1 || len(s.Errors) != 1 || !strings.Contains(s.Errors[0].Error(), "cost limit") {
		t.Fatalf("failed %d, errors %v: want the event failed over the cost limit", s.Failed, s.Errors)
	}
	t.Logf("stopped after %s", time.Since(start))
}

func TestHavingAndProjectShapeTheOutput(t *testing.T) {
	p, err := Compile(mustParse(t, ordersYAML))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.NewShard(Scope{QueryID: "q", PartitionID: "pid", Partition: "p0", Sink: "out"}, nil)
	s.Fold([]Event{
		{Data: json.RawMessage(`{"customer":"acme","amount":10,"ts":60000}`)},
		{Data: json.RawMessage(`{"customer":"acme","amount":5,"ts":61000}`)},
		{Data: json.RawMessage(`{"customer":"acme","amount":-5,"ts":62000}`)},
		{Data: json.RawMessage(`{"customer":"globex","amount":7,"ts":63000}`)},
		{Data: json.RawMessage(`{"customer":"acme","amount":1,"ts":125000}`)},
	})
	_, pushes, err := s.Commit(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Filtered != 1 || len(pushes) != 1 || string(pushes[0].Payload) != `{"customer":"acme","revenue":15}` ||
		pushes[0].Partition != "p0" || pushes[0].Queue != "out" {
		t.Fatalf("filtered %d, pushes %+v: want globex held back by having and acme's 15", s.Filtered, pushes)
	}
}

func TestAStatelessPipelineEmitsEachEventThatPassesTheFilter(t *testing.T) {
	p, err := Compile(v1.Pipeline{Filter: "payload.amount > 0", Project: "{'who': payload.customer, 'at': createdAt, 'p': partition}"})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.NewShard(Scope{QueryID: "q", PartitionID: "pid", Partition: "p0", Sink: "out"}, nil)
	at := time.UnixMilli(1760000000123)
	s.Fold([]Event{{Data: json.RawMessage(`{"customer":"acme","amount":3}`), TransactionID: "a", CreatedAt: at},
		{Data: json.RawMessage(`{"customer":"globex","amount":0}`), TransactionID: "b", CreatedAt: at}})
	ops, pushes, err := s.Commit(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 0 || len(pushes) != 1 || string(pushes[0].Payload) != `{"at":"2025-10-09T08:53:20.123Z","p":"p0","who":"acme"}` {
		t.Fatalf("ops %v pushes %+v", ops, pushes)
	}
	again, _ := p.NewShard(Scope{QueryID: "q", PartitionID: "pid", Partition: "p0", Sink: "out"}, nil)
	again.Fold([]Event{{Data: json.RawMessage(`{"customer":"acme","amount":3}`), TransactionID: "a", CreatedAt: at}})
	if again.pushes[0].TransactionID != pushes[0].TransactionID {
		t.Fatal("the same event's output got another transaction id")
	}
}

// After an upgrade and a rollback, two pipelines of one query emit into
// one sink: their outputs must not share transaction ids, or the broker
// would store the second as a duplicate of the first.
func TestTheOutputsOfTwoPipelinesOfOneQueryHaveDistinctTransactionIds(t *testing.T) {
	emit := func(spec v1.Pipeline) string {
		t.Helper()
		p, err := Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := p.NewShard(Scope{QueryID: "q", PartitionID: "pid", Partition: "p0", Sink: "out"}, nil)
		s.Fold([]Event{{Data: json.RawMessage(`{"customer":"acme","amount":3}`), TransactionID: "a", CreatedAt: time.UnixMilli(1760000000123)}})
		_, pushes, err := s.Commit(nil)
		if err != nil || len(pushes) != 1 {
			t.Fatalf("pushes %+v, %v", pushes, err)
		}
		return pushes[0].TransactionID
	}
	a := v1.Pipeline{Filter: "payload.amount > 0"}
	b := v1.Pipeline{Filter: "payload.amount > 1"}
	if emit(a) != emit(a) {
		t.Fatal("one pipeline's output got two transaction ids")
	}
	if emit(a) == emit(b) {
		t.Fatal("two pipelines' outputs share a transaction id")
	}
}

func TestLateEventsGoToTheLateQueueWhenOneIsNamed(t *testing.T) {
	spec := mustParse(t, ordersYAML)
	spec.Late, spec.Having, spec.Filter = "orders.late", "", ""
	p, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.NewShard(Scope{Partition: "p0", Sink: "out"}, nil)
	s.Fold([]Event{{Data: json.RawMessage(`{"customer":"a","amount":1,"ts":200000}`)},
		{Data: json.RawMessage(`{"customer":"a","amount":2,"ts":10000}`), TransactionID: "old"}})
	_, pushes, _ := s.Commit(nil)
	if s.Late != 1 || len(pushes) != 1 || pushes[0].Queue != "orders.late" || string(pushes[0].Payload) != `{"customer":"a","amount":2,"ts":10000}` {
		t.Fatalf("late %d, pushes %+v", s.Late, pushes)
	}
}

func TestAWindowFromAFileIsRefusedWhenItsFieldsDoNotFitItsType(t *testing.T) {
	for _, c := range []struct {
		w    v1.Window
		want string
	}{
		{v1.Window{Type: v1.WindowTumbling}, "window: a Tumbling window needs a size of at least 1ms"},
		{v1.Window{Type: v1.WindowSliding, Size: dur(time.Microsecond), Slide: dur(time.Microsecond)}, "window: a Sliding window needs a size of at least 1ms"},
		{v1.Window{Type: v1.WindowTumbling, Size: dur(time.Minute), Gap: dur(time.Second)}, "window: gap is for Session windows only"},
		{v1.Window{Type: v1.WindowTumbling, Size: dur(time.Minute), Slide: dur(time.Second)}, "window: slide is for Sliding windows only"},
		{v1.Window{Type: v1.WindowSliding, Size: dur(time.Minute)}, "window: a Sliding window needs a slide of at least 1ms"},
		{v1.Window{Type: v1.WindowSliding, Size: dur(time.Minute), Slide: dur(7 * time.Second)}, "window: size 1m0s is not a multiple of slide 7s"},
		{v1.Window{Type: v1.WindowSession}, "window: a Session window needs a gap of at least 1ms"},
		{v1.Window{Type: v1.WindowSession, Gap: dur(time.Second), Size: dur(time.Minute)}, "window: size and slide are for Tumbling and Sliding windows only"},
		{v1.Window{Type: v1.WindowSession, Gap: dur(time.Second), AllowedLateness: dur(-time.Second)}, "window: allowedLateness must not be negative, and idleFlush must be positive"},
		{v1.Window{Type: "Hopping", Size: dur(time.Minute)}, `window: type "Hopping" is not Tumbling, Sliding or Session`},
	} {
		_, err := Compile(v1.Pipeline{Window: &c.w, Aggregate: []v1.Aggregate{{Name: "n", Fn: v1.FnCount}}})
		if err == nil || err.Error() != c.want {
			t.Errorf("%+v: error %v, want %q", c.w, err, c.want)
		}
	}
}

// TestEveryWindowTypeTheCRDAcceptsHasItsFileHereAndNoOther: the CRD's enum
// (from the kubebuilder marker), v1alpha1.WindowTypes and the window_*.go
// files name the same types, so a type the API accepts always compiles.
func TestEveryWindowTypeTheCRDAcceptsHasItsFileHereAndNoOther(t *testing.T) {
	doc, err := os.ReadFile("../config/crd/bases/streams.regent.dev_streamqueries.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type schema struct {
		Properties map[string]schema `json:"properties"`
		Enum       []string          `json:"enum"`
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &crd); err != nil {
		t.Fatal(err)
	}
	enum := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["pipeline"].Properties["window"].Properties["type"].Enum
	var listed []string
	for _, wt := range v1.WindowTypes {
		listed = append(listed, string(wt))
		if windowKinds[wt] == nil {
			t.Errorf("window type %s has no window_*.go adding it to windowKinds", wt)
		}
	}
	if strings.Join(enum, ",") != strings.Join(listed, ",") {
		t.Errorf("the CRD's enum is %v, v1alpha1.WindowTypes %v", enum, listed)
	}
	if len(windowKinds) != len(v1.WindowTypes) {
		t.Errorf("windowKinds holds %d types, v1alpha1.WindowTypes %d", len(windowKinds), len(v1.WindowTypes))
	}
}
