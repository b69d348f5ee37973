package app_test

import (
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/regent-mq/regent/broker/auth"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/jwkstest"
)

const (
	idpIssuer   = "https://idp.example/realms/acme"
	idpAudience = "regent"
)

// withIdP verifies tokens with the JWK Set at url, as a Keycloak realm
// issues them: the level among the realm roles and the tenant in "org".
func withIdP(url string) brokertest.Option {
	return func(c *config.Config) {
		c.Auth, c.JWTSecret, c.JWKSURL, c.Tenancy = "jwt", "", url, true
		c.JWTIssuer, c.JWTAudience = idpIssuer, idpAudience
		c.RolesClaim, c.TenantClaim = "realm_access.roles", "org"
	}
}

// keycloakClaims are the claims of a Keycloak access token of tenant acme
// with the read-write realm role.
func keycloakClaims() jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"sub": "service-account-orders", "iss": idpIssuer, "aud": []any{"account", idpAudience},
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "typ": "Bearer", "azp": "orders",
		"realm_access": map[string]any{"roles": []any{"default-roles-acme", "offline_access", "read-write"}},
		"org":          "acme",
	}
}

func pushOne(t *testing.T, b *brokertest.Broker, token, txID string) brokertest.Response {
	t.Helper()
	return b.Do(t, "POST", "/api/v1/push", token, map[string]any{"items": []any{
		map[string]any{"queue": "orders", "partition": "p1", "payload": map[string]any{"tx": txID}, "transactionId": txID},
	}})
}

// requireQueue fails the test unless the tenant has the queue.
func requireQueue(t *testing.T, b *brokertest.Broker, tenant, queue string) dbtest.Queue {
	t.Helper()
	q, err := b.DB.Queue(t.Context(), tenant, queue)
	if err != nil {
		t.Fatal(err)
	}
	if !q.Exists {
		t.Fatalf("tenant %s has no queue %s", tenant, queue)
	}
	return q
}

func want401(t *testing.T, what string, r brokertest.Response, wantErr string) {
	t.Helper()
	if r.Status != http.StatusUnauthorized || r.Map(t)["error"] != wantErr {
		t.Fatalf("%s: status %d %s, want 401 {\"error\": %q}", what, r.Status, r.Body, wantErr)
	}
}

func TestATokenOfARotatedIdPKeyIsAcceptedWithNoRestart(t *testing.T) {
	first, second := jwkstest.NewKey(t, "RS256", "2026-11"), jwkstest.NewKey(t, "ES256", "2026-12")
	idp := jwkstest.Start(t, first)
	b := brokertest.Start(t, withIdP(idp.URL))
	if r := pushOne(t, b, first.Sign(t, keycloakClaims()), "before"); r.Status != http.StatusCreated {
		t.Fatalf("push with the first key's token: %d %s", r.Status, r.Body)
	}

	idp.Publish(t, second)
	if r := pushOne(t, b, second.Sign(t, keycloakClaims()), "after"); r.Status != http.StatusCreated {
		t.Fatalf("push with the rotated-in key's token: %d %s", r.Status, r.Body)
	}
	want401(t, "the retired key's token", pushOne(t, b, first.Sign(t, keycloakClaims()), "retired"), "unknown signing key")

	// Both pushes landed on the token's tenant.
	r := b.Do(t, "GET", "/api/v1/pop/queue/orders?batch=10", second.Sign(t, keycloakClaims()), nil)
	var popped struct{ Messages []any }
	if r.JSON(t, &popped); r.Status != http.StatusOK || len(popped.Messages) != 2 {
		t.Fatalf("pop as acme: %d, %d messages, want the 2 pushed: %s", r.Status, len(popped.Messages), r.Body)
	}
	requireQueue(t, b, "acme", "orders")
}

func TestAnAlgConfusionTokenIsRefusedWith401(t *testing.T) {
	k := jwkstest.NewKey(t, "RS256", "rsa")
	b := brokertest.Start(t, withIdP(jwkstest.Start(t, k).URL))
	der, err := x509.MarshalPKIXPublicKey(k.Signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	forged := jwkstest.Forge(t, jwt.SigningMethodHS256, "rsa", der, keycloakClaims())
	want401(t, "HS256 token keyed with the published RSA key", pushOne(t, b, forged, "forged"), "unexpected signing algorithm")
}

func TestAnAlgNoneTokenIsRefusedWith401(t *testing.T) {
	k := jwkstest.NewKey(t, "EdDSA", "ed")
	b := brokertest.Start(t, withIdP(jwkstest.Start(t, k).URL))
	unsigned := jwkstest.Forge(t, jwt.SigningMethodNone, "ed", jwt.UnsafeAllowNoneSignatureType, keycloakClaims())
	want401(t, "alg none", pushOne(t, b, unsigned, "none"), "unexpected signing algorithm")
}

func TestAnExpiredIdPTokenIsRefusedWith401(t *testing.T) {
	k := jwkstest.NewKey(t, "ES256", "ec")
	b := brokertest.Start(t, withIdP(jwkstest.Start(t, k).URL))
	c := keycloakClaims()
	c["iat"], c["exp"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-10*time.Minute).Unix()
	want401(t, "expired token", pushOne(t, b, k.Sign(t, c), "expired"), "token expired")
}

func TestAWrongIssuerOrAudienceIsRefusedWith401(t *testing.T) {
	k := jwkstest.NewKey(t, "RS256", "rsa")
	b := brokertest.Start(t, withIdP(jwkstest.Start(t, k).URL))
	c := keycloakClaims()
	c["iss"] = "https://idp.example/realms/other"
	want401(t, "another realm's token", pushOne(t, b, k.Sign(t, c), "iss"), "invalid issuer")
	c = keycloakClaims()
	c["aud"] = "account"
	want401(t, "a token for another audience", pushOne(t, b, k.Sign(t, c), "aud"), "invalid audience")
}

func TestTheOperatorsHS256TokensStillWorkNextToAnIdentityProvider(t *testing.T) {
	k := jwkstest.NewKey(t, "EdDSA", "ed")
	b := brokertest.Start(t, withIdP(jwkstest.Start(t, k).URL), func(c *config.Config) { c.JWTSecret = brokertest.Secret })
	// Minted as the operator mints: Regent's own claims, no issuer or audience.
	if r := pushOne(t, b, brokertest.Mint(t, "acme", auth.ReadWrite), "operator"); r.Status != http.StatusCreated {
		t.Fatalf("push with the operator's HS256 token: %d %s", r.Status, r.Body)
	}
	if r := pushOne(t, b, k.Sign(t, keycloakClaims()), "provider"); r.Status != http.StatusCreated {
		t.Fatalf("push with the provider's EdDSA token: %d %s", r.Status, r.Body)
	}
	requireQueue(t, b, "acme", "orders") // both tokens act as acme
}
