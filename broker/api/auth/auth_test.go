package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var (
	testNow    = time.Date(2026, 8, 17, 10, 0, 0, 0, time.UTC)
	testSecret = []byte("0123456789abcdef0123456789abcdef")
)

type keys struct {
	rsa, otherRSA *rsa.PrivateKey
	ed, otherEd   ed25519.PrivateKey
}

// Key generation is slow enough to share across tests.
var generateKeys = sync.OnceValues(func() (k keys, err error) {
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return k, err
	}
	if k.otherRSA, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return k, err
	}
	if _, k.ed, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return k, err
	}
	_, k.otherEd, err = ed25519.GenerateKey(rand.Reader)
	return k, err
})

func testKeys(t *testing.T) keys {
	t.Helper()
	k, err := generateKeys()
	if err != nil {
		t.Fatalf("generate keys: %v", err)
	}
	return k
}

func pkixPEM(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func pkcs1PEM(pub *rsa.PublicKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(pub)})
}

// newTestAuth builds an Authenticator whose clock is frozen at testNow.
func newTestAuth(t *testing.T, cfg Config) *Authenticator {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	a.now = func() time.Time { return testNow }
	return a
}

func sign(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

func validClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"sub":  "alice",
		"role": "read-write",
		"iat":  testNow.Unix(),
		"nbf":  testNow.Unix(),
		"exp":  testNow.Add(time.Hour).Unix(),
	}
}

func bearerRequest(token string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func TestLevels(t *testing.T) {
	if !(None < ReadOnly && ReadOnly < ReadWrite && ReadWrite < Admin) {
		t.Fatal("levels must nest: none < read-only < read-write < admin")
	}
	for _, l := range []Level{ReadOnly, ReadWrite, Admin} {
		got, err := ParseLevel(l.String())
		if err != nil || got != l {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", l.String(), got, err, l)
		}
	}
	for _, s := range []string{"", "none", "Admin", "readonly", "superuser"} {
		if l, err := ParseLevel(s); err == nil {
			t.Errorf("ParseLevel(%q) = %v, want an error", s, l)
		}
	}
	if None.String() != "none" {
		t.Errorf("None.String() = %q", None.String())
	}
}

func TestNew(t *testing.T) {
	k := testKeys(t)
	ec384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	smallRSA, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(k.rsa)
	if err != nil {
		t.Fatal(err)
	}
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})

	tests := []struct {
		name    string
		cfg     Config
		wantAlg string // empty for mode off
		wantErr string
	}{
		{name: "empty mode is off", cfg: Config{}},
		{name: "off ignores keys", cfg: Config{Mode: ModeOff, Secret: []byte("x")}},
		{name: "unknown mode", cfg: Config{Mode: "oauth"}, wantErr: "unknown mode"},
		{name: "jwt without key", cfg: Config{Mode: ModeJWT}, wantErr: "needs a secret, a public key or a JWKS URL"},
		{name: "secret and public key", cfg: Config{Mode: ModeJWT, Secret: testSecret, PublicKeyPEM: pkixPEM(t, k.ed.Public())}, wantAlg: "HS256,EdDSA"},
		{name: "public key and JWKS URL", cfg: Config{Mode: ModeJWT, PublicKeyPEM: pkixPEM(t, k.ed.Public()), JWKSURL: "http://127.0.0.1:1/jwks.json"}, wantErr: "not both"},
		{name: "short secret", cfg: Config{Mode: ModeJWT, Secret: []byte("short")}, wantErr: "at least 32"},
		{name: "negative leeway", cfg: Config{Mode: ModeJWT, Secret: testSecret, Leeway: -time.Second}, wantErr: "negative leeway"},
		{name: "not PEM", cfg: Config{Mode: ModeJWT, PublicKeyPEM: []byte("hello")}, wantErr: "no PEM block"},
		{name: "private key", cfg: Config{Mode: ModeJWT, PublicKeyPEM: privPEM}, wantErr: "only the public key"},
		{name: "certificate", cfg: Config{Mode: ModeJWT, PublicKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})}, wantErr: "unsupported PEM block type"},
		{name: "garbage DER", cfg: Config{Mode: ModeJWT, PublicKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2}})}, wantErr: "parse PUBLIC KEY"},
		{name: "ecdsa p-256", cfg: Config{Mode: ModeJWT, PublicKeyPEM: pkixPEM(t, &ecKey.PublicKey)}, wantAlg: "ES256"},
		{name: "ecdsa p-384", cfg: Config{Mode: ModeJWT, PublicKeyPEM: pkixPEM(t, &ec384.PublicKey)}, wantErr: "need P-256"},
		{name: "algorithm pinned to the key's", cfg: Config{Mode: ModeJWT, PublicKeyPEM: pkixPEM(t, k.ed.Public()), Algorithm: "EdDSA"}, wantAlg: "EdDSA"},
		{name: "algorithm auto", cfg: Config{Mode: ModeJWT, Secret: testSecret, Algorithm: AlgorithmAuto}, wantAlg: "HS256"},
		{name: "algorithm that does not fit the key", cfg: Config{Mode: ModeJWT, PublicKeyPEM: pkixPEM(t, &k.rsa.PublicKey), Algorithm: "HS256"}, wantErr: "does not fit the keys"},
		{name: "small rsa", cfg: Config{Mode: ModeJWT, PublicKeyPEM: pkixPEM(t, &smallRSA.PublicKey)}, wantErr: "1024 bits"},
		{name: "hs256", cfg: Config{Mode: ModeJWT, Secret: testSecret}, wantAlg: "HS256"},
		{name: "rsa pkix", cfg: Config{Mode: ModeJWT, PublicKeyPEM: pkixPEM(t, &k.rsa.PublicKey)}, wantAlg: "RS256"},
		{name: "rsa pkcs1", cfg: Config{Mode: ModeJWT, PublicKeyPEM: pkcs1PEM(&k.rsa.PublicKey)}, wantAlg: "RS256"},
		{name: "ed25519", cfg: Config{Mode: ModeJWT, PublicKeyPEM: pkixPEM(t, k.ed.Public())}, wantAlg: "EdDSA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			if alg := strings.Join(a.algs, ","); alg != tt.wantAlg || a.off != (tt.wantAlg == "") {
				t.Errorf("alg = %q off = %v, want alg %q", alg, a.off, tt.wantAlg)
			}
		})
	}
}

func TestAuthenticateModeOff(t *testing.T) {
	a := newTestAuth(t, Config{Mode: ModeOff})
	// Even a garbage token is irrelevant when auth is off.
	id, err := a.Authenticate(bearerRequest("garbage"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Identity{Tenant: DefaultTenant, Level: Admin}); id != want {
		t.Errorf("identity = %+v, want %+v", id, want)
	}
}

func TestAuthenticateHS256(t *testing.T) {
	const leeway = 30 * time.Second
	at := func(d time.Duration) int64 { return testNow.Add(d).Unix() }

	tests := []struct {
		name    string
		cfg     Config // Mode and Secret are filled in
		claims  func(c jwt.MapClaims)
		token   func(t *testing.T, c jwt.MapClaims) string // default: HS256 with testSecret
		header  string                                     // raw Authorization header, overrides token
		want    Identity
		wantErr error
	}{
		{name: "valid", want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "lowercase scheme", header: "bearer TOKEN", want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "no subject", claims: func(c jwt.MapClaims) { delete(c, "sub") }, want: Identity{Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "no time claims", claims: func(c jwt.MapClaims) { delete(c, "exp"); delete(c, "nbf"); delete(c, "iat") }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},

		{name: "no header", header: "-", wantErr: ErrMissingToken},
		{name: "basic scheme", header: "Basic YWxpY2U6cHc=", wantErr: ErrMissingToken},
		{name: "bearer without token", header: "Bearer ", wantErr: ErrMissingToken},
		{name: "two segments", header: "Bearer abc.def", wantErr: ErrMalformedToken},
		{name: "header not base64", header: "Bearer !!!.e30.sig", wantErr: ErrMalformedToken},
		{name: "header not JSON", header: "Bearer bm90LWpzb24.e30.c2ln", wantErr: ErrMalformedToken},
		{name: "no alg", header: "Bearer e30.e30.c2ln", wantErr: ErrUnexpectedAlgorithm},
		{name: "unknown alg", header: "Bearer eyJhbGciOiJYWVoifQ.e30.c2ln", wantErr: ErrUnexpectedAlgorithm},

		{name: "wrong secret", token: func(t *testing.T, c jwt.MapClaims) string {
			return sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), c)
		}, wantErr: ErrInvalidSignature},
		{name: "tampered payload", token: func(t *testing.T, c jwt.MapClaims) string {
			good := strings.Split(sign(t, jwt.SigningMethodHS256, testSecret, c), ".")
			c["role"] = "admin"
			forged := strings.Split(sign(t, jwt.SigningMethodHS256, []byte("attacker-attacker-attacker-12345"), c), ".")
			return forged[0] + "." + forged[1] + "." + good[2]
		}, wantErr: ErrInvalidSignature},
		{name: "alg none", token: func(t *testing.T, c jwt.MapClaims) string {
			return sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, c)
		}, wantErr: ErrUnexpectedAlgorithm},
		{name: "HS512 with the right secret", token: func(t *testing.T, c jwt.MapClaims) string {
			return sign(t, jwt.SigningMethodHS512, testSecret, c)
		}, wantErr: ErrUnexpectedAlgorithm},

		{name: "expired", claims: func(c jwt.MapClaims) { c["exp"] = at(-time.Hour) }, wantErr: ErrTokenExpired},
		{name: "expired within leeway", claims: func(c jwt.MapClaims) { c["exp"] = at(-leeway + time.Second) }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "expired exactly at leeway", claims: func(c jwt.MapClaims) { c["exp"] = at(-leeway) }, wantErr: ErrTokenExpired},
		{name: "custom leeway", cfg: Config{Leeway: 5 * time.Second}, claims: func(c jwt.MapClaims) { c["exp"] = at(-10 * time.Second) }, wantErr: ErrTokenExpired},
		{name: "nbf in future", claims: func(c jwt.MapClaims) { c["nbf"] = at(time.Hour) }, wantErr: ErrTokenNotValidYet},
		{name: "nbf within leeway", claims: func(c jwt.MapClaims) { c["nbf"] = at(leeway) }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "nbf just past leeway", claims: func(c jwt.MapClaims) { c["nbf"] = at(leeway + time.Second) }, wantErr: ErrTokenNotValidYet},
		{name: "iat in future", claims: func(c jwt.MapClaims) { c["iat"] = at(time.Hour) }, wantErr: ErrTokenIssuedInFuture},
		{name: "iat within leeway", claims: func(c jwt.MapClaims) { c["iat"] = at(leeway) }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "iat just past leeway", claims: func(c jwt.MapClaims) { c["iat"] = at(leeway + time.Second) }, wantErr: ErrTokenIssuedInFuture},
		{name: "exp not a number", claims: func(c jwt.MapClaims) { c["exp"] = "tomorrow" }, wantErr: ErrInvalidClaims},
		{name: "sub not a string", claims: func(c jwt.MapClaims) { c["sub"] = 42 }, wantErr: ErrInvalidClaims},

		{name: "issuer ok", cfg: Config{Issuer: "regent"}, claims: func(c jwt.MapClaims) { c["iss"] = "regent" }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "wrong issuer", cfg: Config{Issuer: "regent"}, claims: func(c jwt.MapClaims) { c["iss"] = "mallory" }, wantErr: ErrInvalidIssuer},
		{name: "missing issuer", cfg: Config{Issuer: "regent"}, wantErr: ErrInvalidIssuer},
		{name: "issuer not checked when unset", claims: func(c jwt.MapClaims) { c["iss"] = "anyone" }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "audience string", cfg: Config{Audience: "broker"}, claims: func(c jwt.MapClaims) { c["aud"] = "broker" }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "audience in array", cfg: Config{Audience: "broker"}, claims: func(c jwt.MapClaims) { c["aud"] = []string{"ui", "broker"} }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "wrong audience", cfg: Config{Audience: "broker"}, claims: func(c jwt.MapClaims) { c["aud"] = []string{"ui"} }, wantErr: ErrInvalidAudience},
		{name: "missing audience", cfg: Config{Audience: "broker"}, wantErr: ErrInvalidAudience},

		{name: "role string", claims: func(c jwt.MapClaims) { c["role"] = "admin" }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: Admin}},
		{name: "roles array, highest wins", claims: func(c jwt.MapClaims) { delete(c, "role"); c["roles"] = []string{"read-only", "read-write"} }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "roles beat role", claims: func(c jwt.MapClaims) { c["role"] = "read-only"; c["roles"] = []string{"admin"} }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: Admin}},
		{name: "role beats roles", claims: func(c jwt.MapClaims) { c["role"] = "admin"; c["roles"] = []string{"read-only"} }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: Admin}},
		{name: "unknown roles ignored", claims: func(c jwt.MapClaims) { c["role"] = "superuser"; c["roles"] = []any{"root", 7, "read-only", nil} }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadOnly}},
		{name: "only unknown roles", claims: func(c jwt.MapClaims) { c["role"] = "Admin"; c["roles"] = []string{"owner"} }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: None}},
		{name: "role not a string", claims: func(c jwt.MapClaims) { c["role"] = 3 }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: None}},
		{name: "no role", claims: func(c jwt.MapClaims) { delete(c, "role") }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: None}},

		{name: "tenancy off ignores claim", claims: func(c jwt.MapClaims) { c["tenant"] = "acme" }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "tenancy off ignores malformed claim", claims: func(c jwt.MapClaims) { c["tenant"] = 1 }, want: Identity{Subject: "alice", Tenant: DefaultTenant, Level: ReadWrite}},
		{name: "tenant claim", cfg: Config{Tenancy: true}, claims: func(c jwt.MapClaims) { c["tenant"] = "acme" }, want: Identity{Subject: "alice", Tenant: "acme", Level: ReadWrite}},
		{name: "tenant absent", cfg: Config{Tenancy: true}, wantErr: ErrMissingTenant},
		{name: "tenant empty", cfg: Config{Tenancy: true}, claims: func(c jwt.MapClaims) { c["tenant"] = "" }, wantErr: ErrMissingTenant},
		{name: "tenant absent, with a default token tenant", cfg: Config{Tenancy: true, DefaultTokenTenant: "shared"}, want: Identity{Subject: "alice", Tenant: "shared", Level: ReadWrite}},
		{name: "tenant empty, with a default token tenant", cfg: Config{Tenancy: true, DefaultTokenTenant: "shared"}, claims: func(c jwt.MapClaims) { c["tenant"] = "" }, want: Identity{Subject: "alice", Tenant: "shared", Level: ReadWrite}},
		{name: "tenant named, with a default token tenant", cfg: Config{Tenancy: true, DefaultTokenTenant: "shared"}, claims: func(c jwt.MapClaims) { c["tenant"] = "acme" }, want: Identity{Subject: "alice", Tenant: "acme", Level: ReadWrite}},
		{name: "tenant not a string, with a default token tenant", cfg: Config{Tenancy: true, DefaultTokenTenant: "shared"}, claims: func(c jwt.MapClaims) { c["tenant"] = 7 }, wantErr: ErrInvalidClaims},
		{name: "tenant not a string", cfg: Config{Tenancy: true}, claims: func(c jwt.MapClaims) { c["tenant"] = []string{"acme"} }, wantErr: ErrInvalidClaims},
		{name: "custom tenant claim", cfg: Config{Tenancy: true, TenantClaim: "org"}, claims: func(c jwt.MapClaims) { c["org"] = "acme"; c["tenant"] = "globex" }, want: Identity{Subject: "alice", Tenant: "acme", Level: ReadWrite}},
		{name: "custom tenant claim absent", cfg: Config{Tenancy: true, TenantClaim: "org"}, claims: func(c jwt.MapClaims) { c["tenant"] = "globex" }, wantErr: ErrMissingTenant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Mode, cfg.Secret = ModeJWT, testSecret
			a := newTestAuth(t, cfg)

			c := validClaims()
			if tt.claims != nil {
				tt.claims(c)
			}
			var token string
			if tt.token != nil {
				token = tt.token(t, c)
			} else {
				token = sign(t, jwt.SigningMethodHS256, testSecret, c)
			}
			r := bearerRequest(token)
			switch tt.header {
			case "":
			case "-":
				r.Header.Del("Authorization")
			default:
				r.Header.Set("Authorization", strings.Replace(tt.header, "TOKEN", token, 1))
			}

			id, err := a.Authenticate(r)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Authenticate() error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				assertNoTokenEcho(t, err, r.Header.Get("Authorization"))
				return
			}
			if id != tt.want {
				t.Errorf("identity = %+v, want %+v", id, tt.want)
			}
		})
	}
}

// assertNoTokenEcho checks that no segment of the presented token appears in
// the error text, which ends up in response bodies and logs.
func assertNoTokenEcho(t *testing.T, err error, header string) {
	t.Helper()
	_, token, _ := strings.Cut(header, " ")
	for seg := range strings.SplitSeq(token, ".") {
		if len(seg) >= 3 && strings.Contains(err.Error(), seg) {
			t.Errorf("error %q echoes token segment %q", err, seg)
		}
	}
}

func TestAuthenticatePublicKeys(t *testing.T) {
	k := testKeys(t)
	rsaPKIX := pkixPEM(t, &k.rsa.PublicKey)
	edPKIX := pkixPEM(t, k.ed.Public())
	rsaDER, err := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	edDER, err := x509.MarshalPKIXPublicKey(k.ed.Public())
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		keyPEM  []byte
		method  jwt.SigningMethod
		signKey any
		wantErr error
	}{
		{name: "rs256 pkix", keyPEM: rsaPKIX, method: jwt.SigningMethodRS256, signKey: k.rsa},
		{name: "rs256 pkcs1", keyPEM: pkcs1PEM(&k.rsa.PublicKey), method: jwt.SigningMethodRS256, signKey: k.rsa},
		{name: "eddsa", keyPEM: edPKIX, method: jwt.SigningMethodEdDSA, signKey: k.ed},
		{name: "rs256 other key", keyPEM: rsaPKIX, method: jwt.SigningMethodRS256, signKey: k.otherRSA, wantErr: ErrInvalidSignature},
		{name: "eddsa other key", keyPEM: edPKIX, method: jwt.SigningMethodEdDSA, signKey: k.otherEd, wantErr: ErrInvalidSignature},
		{name: "rs512 with the right key", keyPEM: rsaPKIX, method: jwt.SigningMethodRS512, signKey: k.rsa, wantErr: ErrUnexpectedAlgorithm},
		{name: "ps256 with the right key", keyPEM: rsaPKIX, method: jwt.SigningMethodPS256, signKey: k.rsa, wantErr: ErrUnexpectedAlgorithm},
		{name: "eddsa against rsa", keyPEM: rsaPKIX, method: jwt.SigningMethodEdDSA, signKey: k.ed, wantErr: ErrUnexpectedAlgorithm},
		{name: "rs256 against ed25519", keyPEM: edPKIX, method: jwt.SigningMethodRS256, signKey: k.rsa, wantErr: ErrUnexpectedAlgorithm},
		// Alg confusion: the public key is public, so an attacker can use
		// its bytes as an HMAC secret. The broker must not verify that.
		{name: "hs256 keyed with rsa PEM", keyPEM: rsaPKIX, method: jwt.SigningMethodHS256, signKey: rsaPKIX, wantErr: ErrUnexpectedAlgorithm},
		{name: "hs256 keyed with rsa DER", keyPEM: rsaPKIX, method: jwt.SigningMethodHS256, signKey: rsaDER, wantErr: ErrUnexpectedAlgorithm},
		{name: "hs256 keyed with ed25519 PEM", keyPEM: edPKIX, method: jwt.SigningMethodHS256, signKey: edPKIX, wantErr: ErrUnexpectedAlgorithm},
		{name: "hs256 keyed with ed25519 DER", keyPEM: edPKIX, method: jwt.SigningMethodHS256, signKey: edDER, wantErr: ErrUnexpectedAlgorithm},
		{name: "none against rsa", keyPEM: rsaPKIX, method: jwt.SigningMethodNone, signKey: jwt.UnsafeAllowNoneSignatureType, wantErr: ErrUnexpectedAlgorithm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestAuth(t, Config{Mode: ModeJWT, PublicKeyPEM: tt.keyPEM, Tenancy: true})
			c := validClaims()
			c["tenant"] = "acme"
			id, err := a.Authenticate(bearerRequest(sign(t, tt.method, tt.signKey, c)))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Authenticate() error = %v, want %v", err, tt.wantErr)
			}
			if want := (Identity{Subject: "alice", Tenant: "acme", Level: ReadWrite}); err == nil && id != want {
				t.Errorf("identity = %+v, want %+v", id, want)
			}
		})
	}
}
