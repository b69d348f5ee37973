package streams_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/regent-mq/regent/test/brokertest"
)

// receiver is an in-process OTLP/HTTP collector: it decodes every export
// and keeps the spans with their service names.
type receiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	service map[*tracepb.Span]string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req collector.ExportTraceServiceRequest
	if err == nil && r.URL.Path == "/v1/traces" {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.ResourceSpans {
		var svc string
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				svc = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				rc.spans = append(rc.spans, s)
				rc.service[s] = svc
			}
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// named is the first span called name to start; the test fails on none.
func (rc *receiver) named(t *testing.T, name string) *tracepb.Span {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var found *tracepb.Span
	for _, s := range rc.spans {
		if s.Name == name && (found == nil || s.StartTimeUnixNano < found.StartTimeUnixNano) {
			found = s
		}
	}
	if found == nil {
		t.Fatalf("no span named %q among %d", name, len(rc.spans))
	}
	return found
}

// sendTraced sends a request carrying a W3C traceparent header.
func sendTraced(t *testing.T, b *brokertest.Broker, method, path, traceparent string, body any) []byte {
	t.Helper()
	buf, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, b.URL+path, bytes.NewReader(buf))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	if b.Token != "" {
		req.Header.Set("Authorization", "Bearer "+b.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s (%v)", method, path, resp.StatusCode, out, err)
	}
	return out
}

func wantChild(t *testing.T, child, parent *tracepb.Span) {
	t.Helper()
	if !bytes.Equal(child.TraceId, parent.TraceId) || !bytes.Equal(child.ParentSpanId, parent.SpanId) {
		t.Errorf("span %q (trace %x, parent %x) is not a child of %q (trace %x, span %x)",
			child.Name, child.TraceId, child.ParentSpanId, parent.Name, parent.TraceId, parent.SpanId)
	}
}

// TestOneTraceLinksAPushThePopThatDeliveredItAndTheCycleThatAckedIt runs a
// broker exporting to an in-process OTLP receiver: the push continues the
// producer's trace, the message carries the push span's context to the pop,
// whose span links to it, and the consumer's cycle continues under it.
// Each of the three has its database call as a child span, and what the
// cycle emits continues the trace under the cycle span.
func TestOneTraceLinksAPushThePopThatDeliveredItAndTheCycleThatAckedIt(t *testing.T) {
	rc := &receiver{service: map[*tracepb.Span]string{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "regent-under-test")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")

	f := newFixture(t, brokertest.WithTraceparents)
	const traceID, producerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	sendTraced(t, f.b, "POST", "/api/v1/push", "00-"+traceID+"-"+producerSpan+"-01",
		map[string]any{"items": []map[string]any{{"queue": f.src, "payload": map[string]any{"n": 1}}}})
	p := pop(t, f.b, f.src, 1, "")
	if p == nil || len(p.Messages) != 1 {
		t.Fatalf("pop delivered %+v, want the message", p)
	}
	carried := p.Messages[0].Traceparent
	sendTraced(t, f.b, "POST", "/streams/v1/cycle", carried, f.body(map[string]any{
		"ack":        map[string]any{"leaseId": p.LeaseID},
		"push_items": []map[string]any{{"queue": f.out, "payload": 2}},
	}))
	emitted := pop(t, f.b, f.out, 1, "autoAck=true")
	if emitted == nil || len(emitted.Messages) != 1 {
		t.Fatalf("the cycle emitted %+v, want its message on out", emitted)
	}
	f.b.Stop() // flushes the exporter

	push, popSpan, cycleSpan := rc.named(t, "push"), rc.named(t, "pop"), rc.named(t, "cycle")
	if got := hex.EncodeToString(push.TraceId); got != traceID || hex.EncodeToString(push.ParentSpanId) != producerSpan {
		t.Errorf("push span in trace %s under %x, want the producer's %s under %s", got, push.ParentSpanId, traceID, producerSpan)
	}
	if want := "00-" + traceID + "-" + hex.EncodeToString(push.SpanId) + "-01"; carried != want {
		t.Errorf("popped message carries traceparent %q, want the push span's %q", carried, want)
	}
	linked := false
	for _, l := range popSpan.Links {
		linked = linked || bytes.Equal(l.TraceId, push.TraceId) && bytes.Equal(l.SpanId, push.SpanId)
	}
	if !linked {
		t.Errorf("pop span links %v, want a link to the push span", popSpan.Links)
	}
	wantChild(t, cycleSpan, push)
	if want := "00-" + traceID + "-" + hex.EncodeToString(cycleSpan.SpanId) + "-01"; emitted.Messages[0].Traceparent != want {
		t.Errorf("the cycle's emitted message carries %q, want the cycle span's %q", emitted.Messages[0].Traceparent, want)
	}
	wantChild(t, rc.named(t, "db push"), push)
	wantChild(t, rc.named(t, "db pop"), popSpan)
	wantChild(t, rc.named(t, "db cycle"), cycleSpan)
	for _, s := range []*tracepb.Span{push, popSpan, cycleSpan} {
		if s.Kind != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("span %q kind %v, want server", s.Name, s.Kind)
		}
		if svc := rc.service[s]; svc != "regent-under-test" {
			t.Errorf("span %q from service %q, want OTEL_SERVICE_NAME's", s.Name, svc)
		}
	}
}
