// Package server is the broker's HTTP front: routing, the conventions every
// route shares (CORS, body limits, access levels, metrics), and the public
// health and metrics endpoints.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/metrics"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/tracing"
)

// Route is one endpoint and the access level it needs; auth.None is public.
type Route struct {
	Method  string
	Path    string // net/http pattern path, e.g. /api/v1/pop/queue/{queue}
	Level   auth.Level
	Handler http.HandlerFunc
	// Span names the route's trace span; "" for routes not traced.
	Span string
}

// Deps is what the server needs from the rest of the broker.
type Deps struct {
	DB           *db.DB
	Auth         *auth.Authenticator
	Metrics      *metrics.Metrics
	Log          *slog.Logger
	Version      string
	MaxBodyBytes int64
	// Tenancy keeps the metrics off the API listener: their labels name
	// every tenant's queues (queue-admin-api.md §10).
	Tenancy bool
	// Stopping is closed when the broker is told to stop; /ready fails
	// from then on, so that no new traffic is routed here.
	Stopping <-chan struct{}
}

// New builds the broker's handler from the API routes.
func New(d Deps, routes []Route) http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h http.Handler) {
		mux.Handle(pattern, instrument(d.Metrics.RequestDuration, pattern, h))
	}
	handle("GET /health", health(d))
	handle("GET /ready", ready(d))
	if !d.Tenancy {
		// Public on the API listener as in Queen, where nothing in them
		// belongs to a tenant.
		prom := promhttp.HandlerFor(d.Metrics.Registry, promhttp.HandlerOpts{})
		handle("GET /metrics", prom)
		handle("GET /metrics/prometheus", prom)
	}
	for _, r := range routes {
		var h http.Handler = r.Handler
		// A public route (the console's static files) is served with auth
		// on too; the data routes it calls do the checking.
		if r.Level != auth.None {
			h = d.Auth.Require(r.Level, h)
		}
		if r.Span != "" && tracing.Enabled() {
			h = traced(r.Span, r.Path, h)
		}
		handle(r.Method+" "+r.Path, h)
	}
	mux.HandleFunc("/", notFound(mux))
	return cors(limitBody(d.MaxBodyBytes, mux))
}

// Metrics is the handler of the metrics listener: /metrics and
// /metrics/prometheus, public, whatever the tenancy (the listener is not
// the tenants').
func Metrics(m *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	prom := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	mux.Handle("GET /metrics", prom)
	mux.Handle("GET /metrics/prometheus", prom)
	mux.HandleFunc("/", notFound(mux))
	return mux
}

// notFound is mux's catch-all: a JSON 404, or a 405 naming the methods the
// path is served for.
func notFound(mux *http.ServeMux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if allow := allowed(mux, r); allow != "" {
			w.Header().Set("Allow", allow)
			httpx.WriteError(w, http.StatusMethodNotAllowed, "Method "+r.Method+" not allowed on "+r.URL.Path+"; allowed: "+allow)
			return
		}
		httpx.WriteError(w, http.StatusNotFound, "Not found")
	}
}

// methods are those a route may be registered for.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed lists the methods that r's path is served for, "" when none: a
// path served for other methods is a 405 with Allow, as HTTP says, not a
// 404. The mux's own 405 never happens, since the catch-all "/" matches
// every method.
func allowed(mux *http.ServeMux, r *http.Request) string {
	var allow []string
	for _, m := range methods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host}
		if _, pattern := mux.Handler(probe); pattern != "/" {
			allow = append(allow, m)
		}
	}
	return strings.Join(allow, ", ")
}

func health(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := d.DB.Ping(ctx); err != nil {
			d.Log.Warn("health check: database unreachable", "err", err)
			w.Header().Set("Retry-After", httpx.RetryAfter)
			d.Metrics.DatabaseUp.Set(0)
			httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{
				"status": "unhealthy", "database": "disconnected", "version": d.Version})
			return
		}
		d.Metrics.DatabaseUp.Set(1)
		httpx.WriteJSON(w, http.StatusOK, map[string]string{
			"status": "healthy", "database": "connected", "version": d.Version})
	})
}

// ready is the readiness probe: 503 while the broker is stopping, while
// PostgreSQL is unreachable, or while its schema lacks migrations this
// build needs (a broker started with --migrate=false before the migration
// job ran). /health stays liveness: none of these is cured by a restart.
func ready(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		unready := func(reason string) {
			w.Header().Set("Retry-After", httpx.RetryAfter)
			httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{
				"status": "unready", "reason": reason, "version": d.Version})
		}
		select {
		case <-d.Stopping:
			unready("draining")
			return
		default:
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		migrated, err := d.DB.Migrated(ctx)
		switch {
		case err != nil:
			d.Log.Warn("readiness check: database unreachable", "err", err)
			unready("database unreachable")
		case !migrated:
			unready("schema not migrated")
		default:
			httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready", "version": d.Version})
		}
	})
}

// cors answers every preflight and lets any origin call the API, as Queen does.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
			h.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func limitBody(n int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > n {
			httpx.WriteError(w, http.StatusRequestEntityTooLarge, "Request body larger than "+strconv.FormatInt(n, 10)+" bytes")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, n)
		next.ServeHTTP(w, r)
	})
}

// statusWriter remembers the status code for the latency histogram.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func instrument(h *prometheus.HistogramVec, route string, next http.Handler) http.Handler {
	byRoute := h.MustCurryWith(prometheus.Labels{"route": route})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		byRoute.WithLabelValues(r.Method, strconv.Itoa(sw.code)).Observe(time.Since(start).Seconds())
	})
}

// traced makes a server span for each request, continuing the caller's
// trace when the request carries a W3C traceparent. Only wrapped while
// tracing is on, so an untraced broker pays nothing here.
func traced(name, route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracing.Start(ctx, name, trace.SpanKindServer)
		defer span.End()
		span.SetAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.HTTPRoute(route))
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(semconv.HTTPResponseStatusCode(sw.code))
		if sw.code >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(sw.code))
		}
	})
}
