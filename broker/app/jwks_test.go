package app_test

import (
	"crypto/x509"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
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

// providerKeys are the keys that the shared identity providers publish,
// made once: an RSA, an EC and an Ed25519 key, with kids rsa, ec and ed.
var providerKeys = sync.OnceValues(func() (keySet, error) {
	var k keySet
	var err error
	for _, m := range []struct {
		key      *jwkstest.Key
		alg, kid string
	}{{&k.rsa, "RS256", "rsa"}, {&k.ec, "ES256", "ec"}, {&k.ed, "EdDSA", "ed"}} {
		if *m.key, err = jwkstest.GenerateKey(m.alg, m.kid); err != nil {
			return keySet{}, err
		}
	}
	return k, nil
})

type keySet struct{ rsa, ec, ed jwkstest.Key }

// keys are the shared providers' keys, for a test of a provider group.
func keys(t *testing.T) keySet {
	t.Helper()
	k, err := providerKeys()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// providerGroup is a broker shared by the tests that verify an identity
// provider's tokens (withIdP), with an identity provider of its own that
// publishes providerKeys.
func providerGroup(opts ...brokertest.Option) *brokertest.Group {
	return brokertest.NewGroupWith(func() ([]brokertest.Option, func(), error) {
		k, err := providerKeys()
		if err != nil {
			return nil, nil, err
		}
		idp, stop, err := jwkstest.Serve(k.rsa, k.ec, k.ed)
		if err != nil {
			return nil, nil, err
		}
		return append([]brokertest.Option{withIdP(idp.URL)}, opts...), stop, nil
	})
}

var (
	// provider verifies a provider's tokens.
	provider = providerGroup()
	// providerAndSecret verifies Regent's own HS256 tokens besides.
	providerAndSecret = providerGroup(func(c *config.Config) { c.JWTSecret = brokertest.Secret })
)

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
	k, b := keys(t).rsa, provider.Shared(t)
	der, err := x509.MarshalPKIXPublicKey(k.Signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	forged := jwkstest.Forge(t, jwt.SigningMethodHS256, "rsa", der, keycloakClaims())
	want401(t, "HS256 token keyed with the published RSA key", pushOne(t, b, forged, "forged"), "unexpected signing algorithm")
}

func TestAnAlgNoneTokenIsRefusedWith401(t *testing.T) {
	b := provider.Shared(t)
	unsigned := jwkstest.Forge(t, jwt.SigningMethodNone, keys(t).ed.KID, jwt.UnsafeAllowNoneSignatureType, keycloakClaims())
	want401(t, "alg none", pushOne(t, b, unsigned, "none"), "unexpected signing algorithm")
}

func TestAnExpiredIdPTokenIsRefusedWith401(t *testing.T) {
	k, b := keys(t).ec, provider.Shared(t)
	c := keycloakClaims()
	c["iat"], c["exp"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-10*time.Minute).Unix()
	want401(t, "expired token", pushOne(t, b, k.Sign(t, c), "expired"), "token expired")
}

func TestAWrongIssuerOrAudienceIsRefusedWith401(t *testing.T) {
	k, b := keys(t).rsa, provider.Shared(t)
	c := keycloakClaims()
	c["iss"] = "https://idp.example/realms/other"
	want401(t, "another realm's token", pushOne(t, b, k.Sign(t, c), "iss"), "invalid issuer")
	c = keycloakClaims()
	c["aud"] = "account"
	want401(t, "a token for another audience", pushOne(t, b, k.Sign(t, c), "aud"), "invalid audience")
}

func TestTheOperatorsHS256TokensStillWorkNextToAnIdentityProvider(t *testing.T) {
	k, b := keys(t).ed, providerAndSecret.Shared(t)
	// Minted as the operator mints: Regent's own claims, no issuer or audience.
	if r := pushOne(t, b, brokertest.Mint(t, "acme", auth.ReadWrite), "operator"); r.Status != http.StatusCreated {
		t.Fatalf("push with the operator's HS256 token: %d %s", r.Status, r.Body)
	}
	if r := pushOne(t, b, k.Sign(t, keycloakClaims()), "provider"); r.Status != http.StatusCreated {
		t.Fatalf("push with the provider's EdDSA token: %d %s", r.Status, r.Body)
	}
	requireQueue(t, b, "acme", "orders") // both tokens act as acme
}
