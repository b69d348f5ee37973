package tracing

import (
	"context"
	"testing"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestTracingIsOffByDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"endpoint given", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{"traces endpoint given", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"exporter none wins over an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, false},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
	} {
		got, err := Wanted(env(tc.env))
		if err != nil || got != tc.want {
			t.Errorf("%s: Wanted = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := Wanted(env(map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"})); err == nil {
		t.Error("an exporter the broker does not have was accepted")
	}
}

// TestTracingOffAllocatesNothing: the hot paths call Start, StartDB, End
// and Carried on every request.
func TestTracingOffAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := Start(ctx, "push", 0)
		c, db := StartDB(c, "push")
		End(db, nil)
		End(span, nil)
		if Carried(c, "") != "" {
			t.Fatal("a traceparent from nowhere")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request with tracing off, want 0", allocs)
	}
}

func TestCarriedRewritesAWellFormedTraceparentCanonically(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if got := Carried(context.Background(), tp); got != tp {
		t.Errorf("Carried(%q) = %q", tp, got)
	}
	for _, bad := range []string{"garbage", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		if got := Carried(context.Background(), bad); got != "" {
			t.Errorf("Carried(%q) = %q, want none", bad, got)
		}
	}
}
