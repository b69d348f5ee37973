package auth

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/regent-mq/regent/test/jwkstest"
	"github.com/regent-mq/regent/test/poll"
)

// newJWKSAuth builds an Authenticator on the JWK Set at url, its clock
// frozen at testNow.
func newJWKSAuth(t *testing.T, url string, cfg Config) *Authenticator {
	t.Helper()
	cfg.Mode, cfg.JWKSURL = ModeJWT, url
	return newTestAuth(t, cfg)
}

func authenticate(a *Authenticator, token string) (Identity, error) {
	return a.Authenticate(bearerRequest(token))
}

var alice = Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}

func TestJWKSTokensOfEachAlgorithmAreAccepted(t *testing.T) {
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		t.Run(alg, func(t *testing.T) {
			k := jwkstest.NewKey(t, alg, "k-"+alg)
			a := newJWKSAuth(t, jwkstest.Start(t, k).URL, Config{})
			if id, err := authenticate(a, k.Sign(t, validClaims())); err != nil || id != alice {
				t.Fatalf("Authenticate = %+v, %v; want %+v", id, err, alice)
			}
		})
	}
}

func TestJWKSTokenOfARotatedKeyIsAcceptedWithoutRestart(t *testing.T) {
	old, next := jwkstest.NewKey(t, "RS256", "2026-08"), jwkstest.NewKey(t, "ES256", "2026-09")
	srv := jwkstest.Start(t, old)
	a := newJWKSAuth(t, srv.URL, Config{})
	if _, err := authenticate(a, old.Sign(t, validClaims())); err != nil {
		t.Fatalf("token of the first key: %v", err)
	}

	srv.Publish(t, next)
	if id, err := authenticate(a, next.Sign(t, validClaims())); err != nil || id != alice {
		t.Fatalf("token of the rotated-in key = %+v, %v; want %+v", id, err, alice)
	}
	// The fetch the new kid caused also dropped the retired key.
	if _, err := authenticate(a, old.Sign(t, validClaims())); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("token of the retired key: err = %v, want %v", err, ErrUnknownKey)
	}
}

func TestJWKSUnknownKIDRefetchIsRateLimited(t *testing.T) {
	k := jwkstest.NewKey(t, "EdDSA", "known")
	srv := jwkstest.Start(t, k)
	a := newJWKSAuth(t, srv.URL, Config{})
	start := srv.Fetches()
	for i := range 5 {
		stranger := jwkstest.NewKey(t, "EdDSA", "made-up-"+string(rune('a'+i)))
		if _, err := authenticate(a, stranger.Sign(t, validClaims())); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("token of an unpublished key: err = %v, want %v", err, ErrUnknownKey)
		}
	}
	if got := srv.Fetches() - start; got != 1 {
		t.Fatalf("5 unknown kids caused %d fetches, want 1 per %s", got, UnknownKIDRefetchEvery)
	}
}

func TestJWKSIsRefetchedEveryRefreshInterval(t *testing.T) {
	old, next := jwkstest.NewKey(t, "RS256", "old"), jwkstest.NewKey(t, "RS256", "next")
	srv := jwkstest.Start(t, old)
	a := newJWKSAuth(t, srv.URL, Config{JWKSRefresh: 20 * time.Millisecond})
	go a.Run(t.Context())

	// A retired key is only dropped by a refresh: no token asks for one.
	srv.Publish(t, next)
	poll.Eventually(t, 10*time.Second, func() error {
		if _, err := authenticate(a, old.Sign(t, validClaims())); !errors.Is(err, ErrUnknownKey) {
			return fmt.Errorf("the retired key is not dropped: err = %v, want %v", err, ErrUnknownKey)
		}
		return nil
	})
}

func TestJWKSProviderDownAtStartRefusesTokensUntilItAnswers(t *testing.T) {
	k := jwkstest.NewKey(t, "ES256", "k1")
	srv := jwkstest.Start(t, k)
	srv.Down(true)
	a := newJWKSAuth(t, srv.URL, Config{JWKSRefresh: 20 * time.Millisecond})
	if _, err := authenticate(a, k.Sign(t, validClaims())); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("while the provider is down: err = %v, want %v", err, ErrUnknownKey)
	}
	srv.Down(false)
	go a.Run(t.Context())
	poll.Eventually(t, 10*time.Second, func() error {
		if _, err := authenticate(a, k.Sign(t, validClaims())); err != nil {
			return fmt.Errorf("the token is not accepted once the provider answers: %w", err)
		}
		return nil
	})
}

func TestJWKSAlgorithmComesFromTheKeyWhenTheSetOmitsIt(t *testing.T) {
	rsaKey := jwkstest.NewKey(t, "RS256", "rsa")
	rsaKey.HideAlg = true
	ecKey := jwkstest.NewKey(t, "ES256", "ec")
	ecKey.HideAlg = true
	a := newJWKSAuth(t, jwkstest.Start(t, rsaKey, ecKey).URL, Config{})
	if _, err := authenticate(a, rsaKey.Sign(t, validClaims())); err != nil {
		t.Fatalf("RS256 token of an RSA key published without alg: %v", err)
	}
	// An ES256 token that names the RSA key: the key decides, and it says RS256.
	lying := ecKey
	lying.KID = "rsa"
	if _, err := authenticate(a, lying.Sign(t, validClaims())); !errors.Is(err, ErrUnexpectedAlgorithm) {
		t.Fatalf("ES256 token naming an RSA key: err = %v, want %v", err, ErrUnexpectedAlgorithm)
	}
}

func TestJWKSAlgConfusionHMACTokenSignedWithThePublicKeyIsRefused(t *testing.T) {
	k := jwkstest.NewKey(t, "RS256", "rsa")
	a := newJWKSAuth(t, jwkstest.Start(t, k).URL, Config{})
	der, err := x509.MarshalPKIXPublicKey(k.Signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	for name, secret := range map[string][]byte{
		"PEM": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		"DER": der,
	} {
		t.Run(name, func(t *testing.T) {
			forged := jwkstest.Forge(t, jwt.SigningMethodHS256, "rsa", secret, validClaims())
			if _, err := authenticate(a, forged); !errors.Is(err, ErrUnexpectedAlgorithm) {
				t.Fatalf("HS256 token keyed with the RSA public key: err = %v, want %v", err, ErrUnexpectedAlgorithm)
			}
		})
	}
}

func TestJWKSAlgNoneIsRefused(t *testing.T) {
	k := jwkstest.NewKey(t, "EdDSA", "ed")
	a := newJWKSAuth(t, jwkstest.Start(t, k).URL, Config{})
	unsigned := jwkstest.Forge(t, jwt.SigningMethodNone, "ed", jwt.UnsafeAllowNoneSignatureType, validClaims())
	if _, err := authenticate(a, unsigned); !errors.Is(err, ErrUnexpectedAlgorithm) {
		t.Fatalf("alg none: err = %v, want %v", err, ErrUnexpectedAlgorithm)
	}
}

func TestJWKSExpiredTokenIsRefused(t *testing.T) {
	k := jwkstest.NewKey(t, "ES256", "ec")
	a := newJWKSAuth(t, jwkstest.Start(t, k).URL, Config{})
	c := validClaims()
	c["exp"] = testNow.Add(-time.Hour).Unix()
	if _, err := authenticate(a, k.Sign(t, c)); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("expired token: err = %v, want %v", err, ErrTokenExpired)
	}
}

func TestJWKSIssuerAndAudienceMustMatch(t *testing.T) {
	k := jwkstest.NewKey(t, "RS256", "rsa")
	a := newJWKSAuth(t, jwkstest.Start(t, k).URL, Config{Issuer: "https://idp.example/realms/acme", Audience: "regent"})
	tests := []struct {
		name    string
		iss     string
		aud     any
		wantErr error
	}{
		{name: "both match", iss: "https://idp.example/realms/acme", aud: []string{"account", "regent"}},
		{name: "wrong issuer", iss: "https://idp.example/realms/other", aud: "regent", wantErr: ErrInvalidIssuer},
		{name: "wrong audience", iss: "https://idp.example/realms/acme", aud: "account", wantErr: ErrInvalidAudience},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validClaims()
			c["iss"], c["aud"] = tt.iss, tt.aud
			if _, err := authenticate(a, k.Sign(t, c)); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestJWKSTokenWithoutKIDIsCheckedAgainstTheKeysOfItsAlgorithm(t *testing.T) {
	ed, ec := jwkstest.NewKey(t, "EdDSA", "ed"), jwkstest.NewKey(t, "ES256", "ec")
	a := newJWKSAuth(t, jwkstest.Start(t, ed, ec).URL, Config{})
	ed.KID = ""
	if _, err := authenticate(a, ed.Sign(t, validClaims())); err != nil {
		t.Fatalf("EdDSA token without kid: %v", err)
	}
	stranger := jwkstest.NewKey(t, "RS256", "")
	if _, err := authenticate(a, stranger.Sign(t, validClaims())); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("RS256 token without kid and no RSA key published: err = %v, want %v", err, ErrUnknownKey)
	}
}

func TestRoleAndTenantClaimNamesAreConfigurable(t *testing.T) {
	k := jwkstest.NewKey(t, "RS256", "rsa")
	url := jwkstest.Start(t, k).URL
	tests := []struct {
		name   string
		cfg    Config
		claims jwt.MapClaims
		want   Identity
	}{
		{
			name:   "keycloak realm roles and a tenant attribute",
			cfg:    Config{Tenancy: true, RolesClaim: "realm_access.roles", TenantClaim: "org"},
			claims: jwt.MapClaims{"realm_access": map[string]any{"roles": []any{"offline_access", "admin"}}, "org": "acme"},
			want:   Identity{Subject: "alice", Tenant: "acme", Level: Admin},
		},
		{
			name:   "dex groups",
			cfg:    Config{RolesClaim: "groups"},
			claims: jwt.MapClaims{"groups": []any{"read-only"}},
			want:   Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadOnly},
		},
		{
			name:   "a namespaced claim whose name holds dots",
			cfg:    Config{Tenancy: true, RoleClaim: "https://regent.example/role", TenantClaim: "https://regent.example/tenant"},
			claims: jwt.MapClaims{"https://regent.example/role": "read-write", "https://regent.example/tenant": "globex"},
			want:   Identity{Subject: "alice", Tenant: "globex", Level: ReadWrite},
		},
		{
			name:   "the default claims are not read once renamed",
			cfg:    Config{RoleClaim: "queen_role", RolesClaim: "queen_roles"},
			claims: jwt.MapClaims{"role": "admin", "roles": []any{"admin"}},
			want:   Identity{Subject: "alice", Tenant: DefaultTenant, Level: None},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newJWKSAuth(t, url, tt.cfg)
			c := validClaims()
			delete(c, "role")
			for n, v := range tt.claims {
				c[n] = v
			}
			if id, err := authenticate(a, k.Sign(t, c)); err != nil || id != tt.want {
				t.Fatalf("Authenticate = %+v, %v; want %+v", id, err, tt.want)
			}
		})
	}
}

func TestJWKSAlgorithmSettingNarrowsTheKeysAlgorithms(t *testing.T) {
	ec, ed := jwkstest.NewKey(t, "ES256", "ec"), jwkstest.NewKey(t, "EdDSA", "ed")
	url := jwkstest.Start(t, ec, ed).URL
	a := newJWKSAuth(t, url, Config{Algorithm: "ES256"})
	if _, err := authenticate(a, ec.Sign(t, validClaims())); err != nil {
		t.Fatalf("ES256 token with the algorithm set to ES256: %v", err)
	}
	if _, err := authenticate(a, ed.Sign(t, validClaims())); !errors.Is(err, ErrUnexpectedAlgorithm) {
		t.Fatalf("EdDSA token with the algorithm set to ES256: err = %v, want %v", err, ErrUnexpectedAlgorithm)
	}
	if _, err := New(Config{Mode: ModeJWT, JWKSURL: url, Algorithm: "HS256"}); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("HS256 with a JWK Set: err = %v, want one that says it does not fit", err)
	}
}

func TestWithASecretAndAJWKSetAnHMACTokenIsCheckedOnlyAgainstTheSecret(t *testing.T) {
	k := jwkstest.NewKey(t, "RS256", "rsa")
	a := newJWKSAuth(t, jwkstest.Start(t, k).URL, Config{Secret: testSecret})
	if _, err := authenticate(a, sign(t, jwt.SigningMethodHS256, testSecret, validClaims())); err != nil {
		t.Fatalf("HS256 token of the secret (the operator's): %v", err)
	}
	if _, err := authenticate(a, k.Sign(t, validClaims())); err != nil {
		t.Fatalf("RS256 token of the JWK Set: %v", err)
	}
	der, err := x509.MarshalPKIXPublicKey(k.Signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	forged := jwkstest.Forge(t, jwt.SigningMethodHS256, "rsa", der, validClaims())
	if _, err := authenticate(a, forged); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("HS256 token keyed with the published RSA key: err = %v, want %v", err, ErrInvalidSignature)
	}
}

func TestWithASecretAndAJWKSetTheSecretsTokensKeepRegentsClaimsAndNeedNoIssuer(t *testing.T) {
	k := jwkstest.NewKey(t, "RS256", "rsa")
	a := newJWKSAuth(t, jwkstest.Start(t, k).URL, Config{Secret: testSecret, Tenancy: true, TenantClaim: "org", RolesClaim: "realm_access.roles",
		Issuer: "https://idp.example/realms/acme", Audience: "regent"})
	own := validClaims()
	own["tenant"] = "acme"
	if id, err := authenticate(a, sign(t, jwt.SigningMethodHS256, testSecret, own)); err != nil || id != (Identity{Subject: "alice", Tenant: "acme", Level: ReadWrite}) {
		t.Fatalf("the operator's HS256 token = %+v, %v; want alice on acme, read-write", id, err)
	}
	idp := validClaims()
	delete(idp, "role")
	idp["org"], idp["tenant"] = "globex", "acme"
	if _, err := authenticate(a, k.Sign(t, idp)); !errors.Is(err, ErrInvalidIssuer) {
		t.Fatalf("the provider's token without its issuer: err = %v, want %v", err, ErrInvalidIssuer)
	}
	idp["iss"], idp["aud"] = "https://idp.example/realms/acme", "regent"
	idp["realm_access"] = map[string]any{"roles": []any{"admin"}}
	if id, err := authenticate(a, k.Sign(t, idp)); err != nil || id != (Identity{Subject: "alice", Tenant: "globex", Level: Admin}) {
		t.Fatalf("the provider's RS256 token = %+v, %v; want alice on globex, admin", id, err)
	}
}

func TestRoleValuesAreConfigurablePerLevel(t *testing.T) {
	k := jwkstest.NewKey(t, "ES256", "ec")
	url := jwkstest.Start(t, k).URL
	a := newJWKSAuth(t, url, Config{RolesClaim: "groups", RoleValues: map[Level]string{Admin: "platform-team", ReadOnly: "auditors"}})
	for groups, want := range map[string]Level{"platform-team": Admin, "auditors": ReadOnly, "read-write": ReadWrite, "admin": None} {
		c := validClaims()
		delete(c, "role")
		c["groups"] = []any{"everyone", groups}
		if id, err := authenticate(a, k.Sign(t, c)); err != nil || id.Level != want {
			t.Errorf("groups [everyone %s]: level %v, %v; want %v", groups, id.Level, err, want)
		}
	}
	if _, err := New(Config{Mode: ModeJWT, JWKSURL: url, RoleValues: map[Level]string{ReadOnly: "admin"}}); err == nil || !strings.Contains(err.Error(), `"admin" names both`) {
		t.Fatalf("one role value for two levels: err = %v", err)
	}
}

func TestAKeyPublishedForEncryptionVerifiesNoToken(t *testing.T) {
	enc, bare := jwkstest.NewKey(t, "RS256", "enc"), jwkstest.NewKey(t, "RS256", "bare")
	enc.Use, bare.NoUse = "enc", true
	a := newJWKSAuth(t, jwkstest.Start(t, enc, bare).URL, Config{})
	if _, err := authenticate(a, enc.Sign(t, validClaims())); !errors.Is(err, ErrUnexpectedAlgorithm) {
		t.Fatalf("token of a key whose use is enc: err = %v, want %v", err, ErrUnexpectedAlgorithm)
	}
	if _, err := authenticate(a, bare.Sign(t, validClaims())); err != nil {
		t.Fatalf("token of a key published without a use: %v", err)
	}
}

// TestJWKSFetchesAreCountedByOutcome: every fetch is told to JWKSFetched
// (behind regent_jwks_fetches_total), the one a token of an unknown key ID
// causes included, so that an identity provider that stops answering shows.
func TestJWKSFetchesAreCountedByOutcome(t *testing.T) {
	k := jwkstest.NewKey(t, "ES256", "k1")
	srv := jwkstest.Start(t, k)
	var mu sync.Mutex
	got := map[bool]int{}
	a := newJWKSAuth(t, srv.URL, Config{JWKSFetched: func(ok bool) {
		mu.Lock()
		defer mu.Unlock()
		got[ok]++
	}})
	srv.Down(true)
	stranger := jwkstest.NewKey(t, "ES256", "unknown")
	if _, err := authenticate(a, stranger.Sign(t, validClaims())); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("token of an unpublished key: err = %v, want %v", err, ErrUnknownKey)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[bool]int{true: 1, false: 1}; !maps.Equal(got, want) {
		t.Fatalf("fetches by outcome = %v, want %v (the start's, then the unknown key's while down)", got, want)
	}
}
