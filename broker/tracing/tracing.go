// Package tracing is the broker's OpenTelemetry tracing: an OTLP exporter
// configured by the standard OTEL_* variables, off unless they ask for it,
// and the W3C traceparent a message carries from its producer to its
// consumer.
//
// When off, nothing is exported and Start hands back the context it was
// given with a span that records nothing, so the hot paths pay a branch
// and no allocation.
package tracing

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// on is set by Setup, before the broker serves, and cleared when it stops.
var on atomic.Bool

var tracer trace.Tracer // set with on

// Propagator is the W3C trace context, the only format the broker reads
// and writes.
var Propagator = propagation.TraceContext{}

// Header is the W3C traceparent header's name, written canonically so that
// looking it up allocates nothing.
const Header = "Traceparent"

// Enabled reports whether spans are recorded and exported.
func Enabled() bool { return on.Load() }

// Wanted reads the OTEL_* variables: tracing is on when
// OTEL_TRACES_EXPORTER is "otlp", or is unset while an OTLP endpoint is
// given; "none", OTEL_SDK_DISABLED=true or nothing at all keep it off.
// Any other exporter name is an error, not silently ignored.
func Wanted(getenv func(string) string) (bool, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch exp := getenv("OTEL_TRACES_EXPORTER"); exp {
	case "otlp":
		return true, nil
	case "none":
		return false, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" ||
			getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: the broker exports otlp or none", exp)
	}
}

// Setup starts exporting when the OTEL_* variables ask for it and returns
// the function that flushes and stops the exporter (a no-op when off).
// The exporter reads its endpoint, headers, timeout and TLS settings from
// the OTEL_EXPORTER_OTLP_* variables itself; OTEL_EXPORTER_OTLP_PROTOCOL
// picks http/protobuf (the default) or grpc, and OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name the service.
func Setup(ctx context.Context, version string) (shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	want, err := Wanted(os.Getenv)
	if err != nil || !want {
		return none, err
	}
	var exp sdktrace.SpanExporter
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return none, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: the broker speaks http/protobuf or grpc", proto)
	}
	if err != nil {
		return none, fmt.Errorf("otlp trace exporter: %w", err)
	}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the broker's own name.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("regent"), semconv.ServiceVersion(version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil {
		return none, fmt.Errorf("otel resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator)
	tracer = tp.Tracer("github.com/regent-mq/regent/broker")
	on.Store(true)
	return func(ctx context.Context) error {
		on.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// Start begins a span named name under ctx's span. When tracing is off it
// returns ctx unchanged and the span ctx already holds, which records
// nothing: ending it is harmless.
func Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if !on.Load() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracer.Start(ctx, name, trace.WithSpanKind(kind))
}

// End ends span, marking it failed when err is not nil.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Traceparent is the W3C traceparent of ctx's span, or "" when it has none.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	Propagator.Inject(ctx, c)
	return c["traceparent"]
}

// Parse is the span context of a W3C traceparent; ok is false when it is
// malformed, which the W3C spec says to ignore rather than refuse.
func Parse(traceparent string) (sc trace.SpanContext, ok bool) {
	ctx := Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc = trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// StartDB begins the client span of one call to PostgreSQL, op naming the
// broker operation it serves (push, pop, ack, cycle).
func StartDB(ctx context.Context, op string) (context.Context, trace.Span) {
	if !on.Load() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracer.Start(ctx, "db "+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.DBSystemNamePostgreSQL, semconv.DBOperationName(op)))
}

// Carried is the traceparent a pushed message keeps: with tracing on, the
// push span's, so that the consumer's span continues under it; otherwise
// the producer's own header, when well-formed, rewritten canonically.
func Carried(ctx context.Context, header string) string {
	if on.Load() {
		if tp := Traceparent(ctx); tp != "" {
			return tp
		}
	}
	if header == "" {
		return ""
	}
	sc, ok := Parse(header)
	if !ok {
		return ""
	}
	return Traceparent(trace.ContextWithRemoteSpanContext(ctx, sc))
}

// Link links ctx's span to the span a delivered message's traceparent
// names: a pop that delivers several producers' messages cannot be the
// child of each, so it points at them.
func Link(ctx context.Context, traceparent string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || traceparent == "" {
		return
	}
	if sc, ok := Parse(traceparent); ok {
		span.AddLink(trace.Link{SpanContext: sc})
	}
}
