package registration_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/controllers/registration"
	"github.com/regent-mq/regent/test/nettest"
)

// The full path against a real broker is tested in package controllers;
// here a plain HTTP server answers what a broker should not, to pin down
// how each answer is sorted.

const secret = "registration-test-secret-0123456789abcdef"

func serve(t *testing.T, status int, body string) *registration.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return registration.New(srv.URL, nil, nil)
}

func register(c *registration.Client) registration.Result {
	return c.Register(context.Background(), "acme", registration.Request{Name: "q", Source: "s", ConfigHash: "h"})
}

func TestAnswersAreSortedIntoTheFourOutcomes(t *testing.T) {
	for name, tc := range map[string]struct {
		status int
		body   string
		want   registration.Outcome
		msg    string
	}{
		"200 registered":             {200, `{"success":true,"query_id":"0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f","fresh":true}`, registration.Registered, ""},
		"409 conflict":               {409, `{"success":false,"error":"query 'q' is registered with a different config_hash"}`, registration.Conflict, "different config_hash"},
		"403 denied":                 {403, `{"success":false,"denied":true,"error":"tenant 'acme' has no quota grant"}`, registration.Denied, "no quota grant"},
		"403 without denied":         {403, `{"error":"insufficient access level"}`, registration.Unavailable, "HTTP 403: insufficient access level"},
		"401":                        {401, `{"error":"invalid token"}`, registration.Unavailable, "HTTP 401: invalid token"},
		"500":                        {500, `{"error":"Internal server error"}`, registration.Unavailable, "HTTP 500"},
		"502 not JSON":               {502, `<html>bad gateway</html>`, registration.Unavailable, "not JSON"},
		"200 without success":        {200, `{"success":false}`, registration.Unavailable, "HTTP 200"},
		"200 without a query id":     {200, `{"success":true}`, registration.Unavailable, "HTTP 200"},
		"409 that claims a success":  {409, `{"success":true}`, registration.Unavailable, "HTTP 409"},
		"404 from something else":    {404, `{"error":"not found"}`, registration.Unavailable, "HTTP 404: not found"},
		"empty body with a 204":      {204, ``, registration.Unavailable, "HTTP 204"},
		"queryId read from the body": {200, `{"success":true,"query_id":"x","reset":true}`, registration.Registered, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got := register(serve(t, tc.status, tc.body))
			if got.Outcome != tc.want || !strings.Contains(got.Message, tc.msg) {
				t.Fatalf("got %+v, want outcome %d with a message containing %q", got, tc.want, tc.msg)
			}
		})
	}
}

func TestUnreachableBrokerIsUnavailable(t *testing.T) {
	got := register(registration.New("http://"+nettest.Refusing(t).Addr, nil, nil))
	if got.Outcome != registration.Unavailable || !strings.Contains(got.Message, "connection refused") {
		t.Fatalf("got %+v", got)
	}
}

func TestRequestCarriesTheContractFieldsAndATokenOfTheTenant(t *testing.T) {
	authn, err := auth.New(auth.Config{Mode: auth.ModeJWT, Secret: []byte(secret), Tenancy: true})
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	var id auth.Identity
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/streams/v1/queries" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		if id, err = authn.Authenticate(r); err != nil {
			t.Errorf("token: %v", err)
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("body: %v", err)
		}
		_, _ = io.WriteString(w, `{"success":true,"query_id":"q1"}`)
	}))
	defer srv.Close()

	c := registration.New(srv.URL+"/", []byte(secret), nil)
	res := c.Register(context.Background(), "globex", registration.Request{Name: "n", Source: "src", ConfigHash: "h", Reset: true})
	if res.Outcome != registration.Registered || res.QueryID != "q1" {
		t.Fatalf("got %+v", res)
	}
	if id.Tenant != "globex" || id.Level != auth.ReadWrite {
		t.Fatalf("token identity %+v, want tenant globex with read-write", id)
	}
	want := map[string]any{"name": "n", "source_queue": "src", "sink_queue": "", "config_hash": "h", "reset": true}
	for k, v := range want {
		if body[k] != v {
			t.Fatalf("body %v, want %s = %v", body, k, v)
		}
	}
}

func TestWithoutASecretNoAuthorizationIsSent(t *testing.T) {
	var header string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Get("Authorization")
		_, _ = io.WriteString(w, `{"success":true,"query_id":"q1"}`)
	}))
	defer srv.Close()
	if res := register(registration.New(srv.URL, nil, nil)); res.Outcome != registration.Registered {
		t.Fatalf("got %+v", res)
	}
	if header != "" {
		t.Fatalf("Authorization %q sent without a secret", header)
	}
}

func TestAShortSecretIsUnavailableNotAPanic(t *testing.T) {
	res := register(registration.New("http://127.0.0.1:1", []byte("short"), nil))
	if res.Outcome != registration.Unavailable || !strings.Contains(res.Message, "mint token") {
		t.Fatalf("got %+v", res)
	}
}

// The default tenant is named in the token too, not left for the broker to
// assume: with tenancy on, a token without the claim is refused.
func TestTheDefaultTenantsTokenNamesItsTenant(t *testing.T) {
	var claims jwt.MapClaims
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		claims = jwt.MapClaims{}
		if _, _, err := jwt.NewParser().ParseUnverified(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), claims); err != nil {
			t.Errorf("token: %v", err)
		}
		_, _ = io.WriteString(w, `{"success":true,"query_id":"q1"}`)
	}))
	defer srv.Close()
	c := registration.New(srv.URL, []byte(secret), nil)
	if res := c.Register(context.Background(), auth.DefaultTenant, registration.Request{Name: "q", Source: "s", ConfigHash: "h"}); res.Outcome != registration.Registered {
		t.Fatalf("got %+v", res)
	}
	if claims["tenant"] != auth.DefaultTenant {
		t.Fatalf("token claims %v, want tenant %q", claims, auth.DefaultTenant)
	}
}
