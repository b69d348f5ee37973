package streams_test

import (
	"strings"
	"testing"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/streams/wire"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// shared is the package's broker in a namespace of the test's own, whose
// default caller may register queries: in secure mode its tenant is not
// the default one and needs a quota grant.
func shared(t testing.TB) *brokertest.Broker {
	t.Helper()
	b := brokertest.Shared(t)
	grant(t, b, b.Tenant, nil)
	return b
}

// start starts a broker of the test's own, for a test that needs other
// options or reads the whole database; its default caller may register
// queries, as shared's may.
func start(t testing.TB, opts ...brokertest.Option) *brokertest.Broker {
	t.Helper()
	b := brokertest.Start(t, opts...)
	grant(t, b, b.Tenant, nil)
	return b
}

// tenancy is a broker with tenancy on in either mode, shared by the tests
// that read or set what is their tenant's as a whole (its query listing,
// its quota, its figures), each a tenant of its own.
var tenancy = brokertest.NewGroup(brokertest.WithJWT(true))

// alone is the tenancy broker as a tenant of the test's own, whose default
// caller, an admin, may register queries.
func alone(t testing.TB) *brokertest.Broker {
	t.Helper()
	b := tenancy.Shared(t)
	grant(t, b, b.Tenant, nil)
	return b
}

// tenants is a broker with tenancy on and read-write tokens of two
// tenants: red, and blue, which holds a quota grant.
type tenants struct {
	b                     *brokertest.Broker
	red, blue             string // their tokens
	redTenant, blueTenant string
}

// twoTenants is two tenants of the tenancy broker, or, given options, of a
// broker of the test's own.
func twoTenants(t testing.TB, opts ...brokertest.Option) tenants {
	t.Helper()
	x := tenants{redTenant: "red", blueTenant: "blue"}
	if len(opts) > 0 {
		x.b = brokertest.Start(t, append([]brokertest.Option{brokertest.WithJWT(true)}, opts...)...)
	} else {
		x.b = tenancy.Shared(t)
		x.redTenant, x.blueTenant = x.b.Tenant, tenancy.Shared(t).Tenant
	}
	grant(t, x.b, x.blueTenant, nil)
	x.red, x.blue = brokertest.Mint(t, x.redTenant, auth.ReadWrite), brokertest.Mint(t, x.blueTenant, auth.ReadWrite)
	return x
}

// queues counts the queues called name, red's and blue's.
func (x tenants) queues(t testing.TB, name string) int {
	t.Helper()
	n := 0
	for _, tenant := range []string{x.redTenant, x.blueTenant} {
		q, err := x.b.DB.Queue(t.Context(), tenant, name)
		if err != nil {
			t.Fatal(err)
		}
		if q.Exists {
			n++
		}
	}
	return n
}

// queryAs registers query b.Q("q") on source b.Q("src") as token's tenant and returns
// its id.
func queryAs(t testing.TB, b *brokertest.Broker, token string) string {
	t.Helper()
	r := b.Do(t, "POST", "/streams/v1/queries", token, map[string]any{"name": b.Q("q"), "source_queue": b.Q("src"), "config_hash": "h"})
	wantStatus(t, r, 200)
	return r.Map(t)["query_id"].(string)
}

// partitionAs creates b.Q(queue)'s partition Default as token's tenant (the
// broker's default caller when token is empty) and returns its id.
func partitionAs(t testing.TB, b *brokertest.Broker, token, queue string) string {
	t.Helper()
	r := b.Do(t, "POST", "/api/v1/configure", token, map[string]any{"queue": b.Q(queue)})
	wantStatus(t, r, 200)
	id, _ := r.Map(t)["partitionId"].(string)
	if id == "" {
		t.Fatalf("configure answered no partitionId: %s", r.Body)
	}
	return id
}

// grant gives tenant an enabled quota grant with the cap max (nil: none).
func grant(t testing.TB, b *brokertest.Broker, tenant string, max *int) {
	t.Helper()
	if tenant == auth.DefaultTenant {
		return
	}
	b.Grant(t, tenant, max)
}

// post sends a JSON POST as the broker's default caller.
func post(t testing.TB, b *brokertest.Broker, path string, body any) brokertest.Response {
	t.Helper()
	return b.Do(t, "POST", path, "", body)
}

// wantStatus fails the test unless r has the status.
func wantStatus(t testing.TB, r brokertest.Response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
}

// want400 posts each body to path and requires a 400 whose message
// mentions the body's field.
func want400(t testing.TB, b *brokertest.Broker, path string, fieldOf map[string]string) {
	t.Helper()
	for body, field := range fieldOf {
		r := post(t, b, path, body)
		wantStatus(t, r, 400)
		if !strings.Contains(string(r.Body), field) {
			t.Fatalf("400 body %s for %s does not mention %q", r.Body, body, field)
		}
	}
}

// wantNotFound requires the ownership gate's answer.
func wantNotFound(t testing.TB, r brokertest.Response) {
	t.Helper()
	wantStatus(t, r, 404)
	if string(r.Body) != `{"error":"not found"}` {
		t.Fatalf("404 body %s, want {\"error\":\"not found\"}", r.Body)
	}
}

type registered struct {
	Success    bool   `json:"success"`
	QueryID    string `json:"query_id"`
	Name       string `json:"name"`
	ConfigHash string `json:"config_hash"`
	Fresh      bool   `json:"fresh"`
	Reset      bool   `json:"reset"`
	Generation string `json:"-"` // the Regent-Reset-Generation header
}

// register registers query b.Q(name) on b.Q(source), sinking to b.Q(sink)
// (none for ""), and requires a 200.
func register(t testing.TB, b *brokertest.Broker, name, source, sink, hash string, reset bool) registered {
	t.Helper()
	if sink != "" {
		sink = b.Q(sink)
	}
	r := post(t, b, "/streams/v1/queries", map[string]any{
		"name": b.Q(name), "source_queue": b.Q(source), "sink_queue": sink, "config_hash": hash, "reset": reset})
	wantStatus(t, r, 200)
	var out registered
	r.JSON(t, &out)
	out.Generation = r.Header.Get(wire.ResetGenerationHeader)
	return out
}
