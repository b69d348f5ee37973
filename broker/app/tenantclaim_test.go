package app_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/jwkstest"
)

// With tenancy on, a verified token that names no tenant is refused (issue
// 41): an identity provider's users mostly hold a role and no tenant claim,
// and must not all act as the default tenant. --default-token-tenant names
// the tenant such tokens get instead.

// tenantlessAdmin is a provider's token as issued to a user whom no one has
// mapped a tenant to: a valid admin, without the "org" claim.
func tenantlessAdmin() jwt.MapClaims {
	c := keycloakClaims()
	delete(c, "org")
	c["realm_access"] = map[string]any{"roles": []any{"offline_access", "admin"}}
	return c
}

func withDefaultTokenTenant(tenant string) brokertest.Option {
	return func(c *config.Config) { c.DefaultTokenTenant = tenant }
}

// wantRefusedOnEveryRoute checks that token is refused with 403 and the
// one message naming claim on every route that takes a token (queue,
// streams, admin and the console's API alike), and that nothing was
// written: it runs alone (no test of the package is parallel to it), so
// no queue or query of any tenant may appear meanwhile.
func wantRefusedOnEveryRoute(t *testing.T, b *brokertest.Broker, token, claim string) {
	t.Helper()
	objects := func() int {
		t.Helper()
		n, err := b.DB.Objects(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := objects()
	want := `missing tenant claim "` + claim + `": with tenancy on, a token must name its tenant`
	for _, l := range levels {
		r := b.Do(t, l.method, l.probe, token, "{}")
		if r.Status != http.StatusForbidden || r.Map(t)["error"] != want {
			t.Errorf("%s %s: status %d %s, want 403 {\"error\": %q}", l.method, l.probe, r.Status, r.Body, want)
		}
	}
	if r := pushOne(t, b, token, "tenantless"); r.Status != http.StatusForbidden {
		t.Errorf("push: status %d %s, want 403", r.Status, r.Body)
	}
	if n := objects() - before; n != 0 {
		t.Errorf("%d queues and queries were made by the refused token, want none", n)
	}
}

func TestAProviderTokenThatNamesNoTenantIsRefusedWith403OnEveryRoute(t *testing.T) {
	k, b := keys(t).rsa, provider.Shared(t)
	wantRefusedOnEveryRoute(t, b, k.Sign(t, tenantlessAdmin()), "org")
}

func TestAProviderTokenThatNamesItsTenantIsAcceptedOnEveryRoute(t *testing.T) {
	k, b := keys(t).rsa, provider.Shared(t)
	c := tenantlessAdmin()
	c["org"] = "acme"
	tok := k.Sign(t, c)
	for _, l := range levels {
		if r := b.Do(t, l.method, l.probe, tok, "{}"); r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden {
			t.Errorf("%s %s: status %d %s, want the token accepted", l.method, l.probe, r.Status, r.Body)
		}
	}
	if r := pushOne(t, b, tok, "named"); r.Status != http.StatusCreated {
		t.Fatalf("push: status %d %s, want 201", r.Status, r.Body)
	}
	requireQueue(t, b, "acme", "orders")
}

func TestWithADefaultTokenTenantATokenThatNamesNoneActsAsThatTenantAndSeesNothingOfDefault(t *testing.T) {
	k := jwkstest.NewKey(t, "RS256", "rsa")
	idp := jwkstest.Start(t, k).URL
	shared := brokertest.Start(t, withIdP(idp), withDefaultTokenTenant("shared"))
	ofDefault := keycloakClaims()
	ofDefault["org"] = "default"
	tenantless := k.Sign(t, tenantlessAdmin())
	if r := pushOne(t, shared, k.Sign(t, ofDefault), "of-default"); r.Status != http.StatusCreated {
		t.Fatalf("push as default: %d %s", r.Status, r.Body)
	}
	if r := pushOne(t, shared, tenantless, "of-shared"); r.Status != http.StatusCreated {
		t.Fatalf("push with the tenantless token: %d %s", r.Status, r.Body)
	}
	requireQueue(t, shared, "default", "orders")
	sharedOrders := requireQueue(t, shared, "shared", "orders")
	wantPopped(t, shared, tenantless, "of-shared")
	r := shared.Do(t, "GET", "/api/v1/resources/queues", tenantless, nil)
	var list struct{ Queues []struct{ ID string } }
	if r.JSON(t, &list); r.Status != http.StatusOK || len(list.Queues) != 1 || list.Queues[0].ID != sharedOrders.ID {
		t.Fatalf("queues listed to the tenantless token: %d %s, want shared's orders alone", r.Status, r.Body)
	}

	// Named default, the flag hands such tokens default's data, and only it.
	dflt := brokertest.StartOn(t, shared.DatabaseURL, withIdP(idp), withDefaultTokenTenant("default"))
	wantPopped(t, dflt, tenantless, "of-default")
}

// wantPopped pops queue orders with token and wants the messages of the
// transaction ids txIDs, in order.
func wantPopped(t *testing.T, b *brokertest.Broker, token string, txIDs ...string) {
	t.Helper()
	r := b.Do(t, "GET", "/api/v1/pop/queue/orders?batch=10&wait=false", token, nil)
	var pop struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
		}
	}
	r.JSON(t, &pop)
	var got []string
	for _, m := range pop.Messages {
		got = append(got, m.TransactionID)
	}
	if r.Status != http.StatusOK || !slices.Equal(got, txIDs) {
		t.Fatalf("pop: %d %v, want %v", r.Status, got, txIDs)
	}
}

func TestRegentsOwnHS256TokenThatNamesNoTenantIsRefusedToo(t *testing.T) {
	now := time.Now()
	own, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "an-older-script", "role": "admin", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}).SignedString([]byte(brokertest.Secret))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("alone", func(t *testing.T) {
		wantRefusedOnEveryRoute(t, tenants.Shared(t), own, "tenant")
	})
	// Beside a provider, the secret's tokens keep Regent's claim names, so
	// the message names Regent's claim, not the provider's.
	t.Run("beside a provider", func(t *testing.T) {
		wantRefusedOnEveryRoute(t, providerAndSecret.Shared(t), own, "tenant")
	})
}
