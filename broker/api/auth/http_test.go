package auth

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// whoami is a real handler behind the middleware: it reports the identity
// it was given.
var whoami = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	id := FromContext(r.Context())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"subject": id.Subject, "tenant": id.Tenant, "level": id.Level.String()})
})

func TestRequire(t *testing.T) {
	a := newTestAuth(t, Config{Mode: ModeJWT, Secret: testSecret, Tenancy: true})
	token := func(role string) string {
		c := validClaims()
		c["role"], c["tenant"] = role, "acme"
		return sign(t, jwt.SigningMethodHS256, testSecret, c)
	}
	expired := validClaims()
	expired["exp"] = testNow.Add(-24 * time.Hour).Unix()
	// An admin that names no tenant: refused whatever the level, with the
	// claim that the broker reads the tenant from.
	tenantless := validClaims()
	tenantless["role"], tenantless["org"] = "admin", ""
	orgs := newTestAuth(t, Config{Mode: ModeJWT, Secret: testSecret, Tenancy: true, TenantClaim: "org"})

	tests := []struct {
		name     string
		auth     *Authenticator
		level    Level
		header   string
		wantCode int
		wantBody map[string]string
	}{
		{name: "no token", auth: a, level: ReadOnly, wantCode: 401, wantBody: map[string]string{"error": "missing bearer token"}},
		{name: "garbage token", auth: a, level: ReadOnly, header: "Bearer not-a-jwt", wantCode: 401, wantBody: map[string]string{"error": "malformed token"}},
		{name: "wrong secret", auth: a, level: ReadOnly, header: "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), validClaims()), wantCode: 401, wantBody: map[string]string{"error": "invalid signature"}},
		{name: "expired", auth: a, level: ReadOnly, header: "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, expired), wantCode: 401, wantBody: map[string]string{"error": "token expired"}},
		{name: "read-only on read-write route", auth: a, level: ReadWrite, header: "Bearer " + token("read-only"), wantCode: 403, wantBody: map[string]string{"error": "Insufficient permissions"}},
		{name: "read-write on admin route", auth: a, level: Admin, header: "Bearer " + token("read-write"), wantCode: 403, wantBody: map[string]string{"error": "Insufficient permissions"}},
		{name: "no role on read-only route", auth: a, level: ReadOnly, header: "Bearer " + token("guest"), wantCode: 403, wantBody: map[string]string{"error": "Insufficient permissions"}},
		{name: "no tenant", auth: a, level: ReadOnly, header: "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, tenantless), wantCode: 403, wantBody: map[string]string{"error": `missing tenant claim "tenant": with tenancy on, a token must name its tenant`}},
		{name: "no tenant in a renamed claim", auth: orgs, level: ReadOnly, header: "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, tenantless), wantCode: 403, wantBody: map[string]string{"error": `missing tenant claim "org": with tenancy on, a token must name its tenant`}},
		{name: "exact level", auth: a, level: ReadWrite, header: "Bearer " + token("read-write"), wantCode: 200, wantBody: map[string]string{"subject": "alice", "tenant": "acme", "level": "read-write"}},
		{name: "admin nests read-only", auth: a, level: ReadOnly, header: "Bearer " + token("admin"), wantCode: 200, wantBody: map[string]string{"subject": "alice", "tenant": "acme", "level": "admin"}},
		{name: "auth off", auth: newTestAuth(t, Config{}), level: Admin, wantCode: 200, wantBody: map[string]string{"subject": "", "tenant": "default", "level": "admin"}},
		{name: "nil authenticator fails closed", auth: nil, level: ReadOnly, wantCode: 500, wantBody: map[string]string{"error": "authentication not configured"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.auth.Require(tt.level, whoami))
			defer srv.Close()

			req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}

			if resp.StatusCode != tt.wantCode {
				t.Errorf("status = %d, want %d (body %s)", resp.StatusCode, tt.wantCode, raw)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if got := resp.Header.Get("WWW-Authenticate"); (tt.wantCode == 401) != (got == "Bearer") {
				t.Errorf("WWW-Authenticate = %q with status %d", got, resp.StatusCode)
			}
			var body map[string]string
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("body %q: %v", raw, err)
			}
			if len(body) != len(tt.wantBody) {
				t.Fatalf("body = %v, want %v", body, tt.wantBody)
			}
			for k, v := range tt.wantBody {
				if body[k] != v {
					t.Errorf("body[%q] = %q, want %q", k, body[k], v)
				}
			}
		})
	}
}

func TestFromContext(t *testing.T) {
	if got, want := FromContext(context.Background()), (Identity{Tenant: DefaultTenant, Level: Admin}); got != want {
		t.Errorf("FromContext(empty) = %+v, want %+v", got, want)
	}
	id := Identity{Subject: "bob", Tenant: "acme", Level: ReadOnly}
	if got := FromContext(WithIdentity(context.Background(), id)); got != id {
		t.Errorf("FromContext = %+v, want %+v", got, id)
	}
}
