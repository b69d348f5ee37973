package app_test

import (
	"net/http"
	"sort"
	"testing"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/test/brokertest"
)

// levels are the access levels of the routes the broker registers, from
// the table of queue-admin-api.md (routetable_test.go).
var levels = apiRoutes()

func TestEveryRouteHasTheLevelTheContractGives(t *testing.T) {
	got := registeredRoutes(t)
	want := map[string]auth.Level{}
	for _, l := range levels {
		want[l.method+" "+l.path] = l.level
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s: level %v, want %v", k, got[k], want[k])
		}
	}
}

func TestAccessLevelOfEveryRouteForEachRoleAndNoToken(t *testing.T) {
	b := tenants.Shared(t)
	tokens := map[string]string{
		"no token":   brokertest.NoToken,
		"read-only":  brokertest.Mint(t, b.Tenant, auth.ReadOnly),
		"read-write": brokertest.Mint(t, b.Tenant, auth.ReadWrite),
		"admin":      b.Token,
	}
	has := map[string]auth.Level{"read-only": auth.ReadOnly, "read-write": auth.ReadWrite, "admin": auth.Admin}
	for _, l := range levels {
		for role, tok := range tokens {
			t.Run(l.method+" "+l.path+" as "+role, func(t *testing.T) {
				r := b.Do(t, l.method, l.probe, tok, "{}")
				switch {
				case role == "no token":
					if r.Status != http.StatusUnauthorized || r.Map(t)["error"] == nil {
						t.Fatalf("status %d %s, want 401 with an error", r.Status, r.Body)
					}
				case has[role] < l.level:
					if r.Status != http.StatusForbidden || r.Map(t)["error"] != "Insufficient permissions" {
						t.Fatalf("status %d %s, want 403 Insufficient permissions", r.Status, r.Body)
					}
				default:
					if r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden {
						t.Fatalf("status %d %s: the level suffices", r.Status, r.Body)
					}
				}
			})
		}
	}
}

func TestHealthAndReadinessArePublicWithAuthOn(t *testing.T) {
	b := tenants.Shared(t)
	for _, p := range []string{"/health", "/ready"} {
		if r := b.Do(t, "GET", p, brokertest.NoToken, nil); r.Status != http.StatusOK {
			t.Fatalf("GET %s without a token = %d", p, r.Status)
		}
	}
}

// queue-admin-api.md §10: the metrics are public on a listener of their
// own; on the API listener they stay public with tenancy off, as in Queen,
// and are a 404 with it on, since their labels name every tenant's queues.
func TestMetricsArePublicOnTheirListenerAndOffTheAPIWithTenancy(t *testing.T) {
	for _, tenancy := range []bool{false, true} {
		b := map[bool]*brokertest.Group{false: authNoTenancy, true: tenants}[tenancy].Shared(t)
		for _, p := range []string{"/metrics", "/metrics/prometheus"} {
			if r := brokertest.At(b.MetricsURL).Do(t, "GET", p, brokertest.NoToken, nil); r.Status != http.StatusOK {
				t.Errorf("tenancy %v: GET %s on the metrics listener = %d", tenancy, p, r.Status)
			}
			r := b.Do(t, "GET", p, brokertest.NoToken, nil)
			if want := map[bool]int{false: http.StatusOK, true: http.StatusNotFound}[tenancy]; r.Status != want {
				t.Errorf("tenancy %v: GET %s on the API listener = %d, want %d", tenancy, p, r.Status, want)
			}
		}
		if r := brokertest.At(b.MetricsURL).Do(t, "POST", "/api/v1/push", brokertest.NoToken, map[string]any{}); r.Status != http.StatusNotFound {
			t.Errorf("tenancy %v: the metrics listener answered the API: %d %s", tenancy, r.Status, r.Body)
		}
	}
}
