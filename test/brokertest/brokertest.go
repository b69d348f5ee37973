// Package brokertest starts a real broker in the test process: a fresh
// migrated PostgreSQL database from pgtest, the broker built by broker/app,
// and a real HTTP listener on a loopback port.
//
// With REGENT_TEST_MODE=secure, every broker starts with --auth=jwt and
// --tenancy=on, and requests sent without a token carry Broker.Token, an
// admin token of tenant SecureTenant. `make test` runs the queue and streams
// suites in both modes, so the whole contract is checked with tenancy on too.
package brokertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/app"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/pgtest"
)

// Broker is a running broker and a pool on its database.
type Broker struct {
	URL         string // base URL, e.g. http://127.0.0.1:41234
	MetricsURL  string // the metrics listener's base URL
	DatabaseURL string
	Pool        *pgxpool.Pool // a separate pool, for assertions on the database
	Config      config.Config
	// Token is sent by Do when the caller passes none: empty with auth off,
	// an admin token of SecureTenant in secure mode.
	Token string
	// Tenant is the tenant that requests without a token act as.
	Tenant string
	// Subject is the sub claim of Token; empty without one.
	Subject string
	// DB arranges and inspects the broker's database through the seam.
	DB *dbtest.DB
	// prefix starts the name of every queue of the test's namespace (Q).
	prefix string
	stop   func()
	halt   func() error
}

// Stop stops the broker before the test ends, as a crash would for its
// clients: its port stops answering. Its database stays.
func (b *Broker) Stop() { b.stop() }

// Secret is the HS256 secret of brokers in secure mode, and of tests that
// turn auth on themselves with WithJWT.
const Secret = "brokertest-signing-secret-0123456789abcdef"

// NoToken, passed to Do, sends no Authorization header even in secure mode.
const NoToken = "<no token>"

// SecureTenant is the tenant Broker.Token acts as in secure mode.
const SecureTenant = "acme"

// Secure reports whether REGENT_TEST_MODE asks for auth and tenancy on.
func Secure() bool { return os.Getenv("REGENT_TEST_MODE") == "secure" }

// WithJWT turns on JWT auth with Secret, and tenancy when tenancy is true.
func WithJWT(tenancy bool) Option {
	return func(c *config.Config) {
		c.Auth, c.JWTSecret, c.Tenancy = "jwt", Secret, tenancy
	}
}

// WithTraceparents stores a push's traceparent with its messages
// (--store-traceparent).
func WithTraceparents(c *config.Config) { c.StoreTraceparent = true }

// Mint signs a token with Secret for the tenant and level.
func Mint(t testing.TB, tenant string, level auth.Level) string {
	t.Helper()
	tok, err := auth.MintHS256([]byte(Secret), auth.MintClaims{Subject: "test-" + tenant, Tenant: tenant, Role: level, TTL: time.Hour})
	if err != nil {
		t.Fatalf("brokertest: mint token: %v", err)
	}
	return tok
}

// Option adjusts the configuration before the broker starts.
type Option func(*config.Config)

// Start starts a broker on a fresh database. It stops when the test ends.
func Start(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	return StartOn(t, pgtest.URL(t), opts...)
}

// StartOn starts a broker on an existing database, so that several brokers
// can share one, as replicas do.
func StartOn(t testing.TB, dbURL string, opts ...Option) *Broker {
	t.Helper()
	b, err := launch(dbURL, t.TempDir(), opts)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	t.Cleanup(func() {
		if err := b.halt(); err != nil {
			t.Errorf("brokertest: %v", err)
		}
	})
	if Secure() {
		b.Token, b.Tenant, b.Subject = Mint(t, SecureTenant, auth.Admin), SecureTenant, "test-"+SecureTenant
	}
	return b
}

// launch starts a broker on dbURL, spooling under spoolDir. halt stops it
// and closes its pool.
func launch(dbURL, spoolDir string, opts []Option) (*Broker, error) {
	cfg, err := config.Parse("broker", []string{"--database-url=" + dbURL, "--pool-size=10", "--spool-dir=" + spoolDir, "--drain-grace=0"},
		func(string) string { return "" })
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if Secure() {
		WithJWT(true)(&cfg)
	}
	for _, o := range opts {
		o(&cfg)
	}
	level := slog.LevelWarn
	if os.Getenv("REGENT_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, cancel := context.WithCancel(context.Background())
	b, err := app.New(ctx, cfg, log)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("start broker: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		b.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		l.Close()
		b.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, l, ml) }()
	var serveErr error
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				serveErr = fmt.Errorf("serve: %w", err)
			}
			b.Close()
		})
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		stop()
		return nil, fmt.Errorf("open pool: %w", err)
	}
	br := &Broker{URL: "http://" + l.Addr().String(), MetricsURL: "http://" + ml.Addr().String(), DatabaseURL: dbURL, Pool: pool,
		DB: dbtest.New(pool), Config: cfg, Tenant: auth.DefaultTenant, stop: stop}
	br.halt = func() error {
		stop()
		pool.Close()
		return serveErr
	}
	return br, nil
}

// At addresses a broker that runs elsewhere (a subprocess, the local
// stack) by its base URL, for Do. It has no pool and no default token.
func At(url string) *Broker { return &Broker{URL: url} }

// Response is a decoded HTTP answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	Close  bool // the server closed the connection after the answer
}

// JSON decodes the body into v, failing the test when it is not JSON.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("response %d is not JSON (%v): %s", r.Status, err, r.Body)
	}
}

// Map decodes the body as a JSON object.
func (r Response) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// Do sends a request with a bearer token: token, or b.Token when token is
// empty, or none for NoToken. A body that is a string
// or []byte is sent as is; anything else is encoded as JSON.
func (b *Broker) Do(t testing.TB, method, path, token string, body any) Response {
	t.Helper()
	r, err := b.Send(method, path, token, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Send is Do for a goroutine other than the test's, where a failure must
// be handed back rather than end the test.
func (b *Broker) Send(method, path, token string, body any) (Response, error) {
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		buf, err := json.Marshal(v)
		if err != nil {
			return Response{}, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, b.URL+path, rd)
	if err != nil {
		return Response{}, fmt.Errorf("new request: %w", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch token {
	case "":
		token = b.Token
	case NoToken:
		token = ""
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: out, Close: resp.Close}, nil
}

// Count runs a query that returns one number on the broker's database, for
// tests that check what a request wrote.
func (b *Broker) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// SinkCounts pops queue as group, auto-acked, and sums the "count" field of
// the messages' payloads (a windowed query's output) until the sum reaches
// want or within has passed, and returns the sum.
func (b *Broker) SinkCounts(t testing.TB, queue, group, token string, want int64, within time.Duration) int64 {
	t.Helper()
	counted := int64(0)
	for deadline := time.Now().Add(within); counted < want && time.Now().Before(deadline); {
		r := b.Do(t, "GET", "/api/v1/pop/queue/"+queue+"?batch=100&wait=true&timeout=1000&autoAck=true&consumerGroup="+group, token, nil)
		if r.Status == http.StatusNoContent {
			continue
		}
		var pop struct {
			Messages []struct {
				Data struct {
					Count int64 `json:"count"`
				} `json:"data"`
			} `json:"messages"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &pop) != nil {
			t.Fatalf("pop %s = %d %s", queue, r.Status, r.Body)
		}
		for _, m := range pop.Messages {
			counted += m.Data.Count
		}
	}
	return counted
}
