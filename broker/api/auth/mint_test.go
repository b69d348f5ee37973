package auth

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestMintRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		c    MintClaims
		want Identity
	}{
		{
			name: "operator token",
			cfg:  Config{Tenancy: true, Issuer: "regent-operator", Audience: "regent-broker"},
			c:    MintClaims{Subject: "operator", Tenant: "acme", Role: ReadWrite, Issuer: "regent-operator", Audience: "regent-broker"},
			want: Identity{Subject: "operator", Tenant: "acme", Level: ReadWrite},
		},
		{
			name: "custom tenant claim",
			cfg:  Config{Tenancy: true, TenantClaim: "org"},
			c:    MintClaims{Subject: "operator", Tenant: "acme", Role: Admin, TenantClaim: "org"},
			want: Identity{Subject: "operator", Tenant: "acme", Level: Admin},
		},
		{
			name: "the default tenant",
			cfg:  Config{Tenancy: true},
			c:    MintClaims{Tenant: DefaultTenant, Role: ReadOnly},
			want: Identity{Tenant: DefaultTenant, Level: ReadOnly},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token, err := mint(testSecret, tt.c, testNow)
			if err != nil {
				t.Fatal(err)
			}
			cfg := tt.cfg
			cfg.Mode, cfg.Secret = ModeJWT, testSecret
			id, err := newTestAuth(t, cfg).Authenticate(bearerRequest(token))
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if id != tt.want {
				t.Errorf("identity = %+v, want %+v", id, tt.want)
			}
		})
	}
}

func TestMintTimes(t *testing.T) {
	for _, tt := range []struct {
		ttl, want time.Duration
	}{{0, DefaultMintTTL}, {time.Minute, time.Minute}} {
		token, err := mint(testSecret, MintClaims{Tenant: "acme", Role: ReadWrite, TTL: tt.ttl}, testNow)
		if err != nil {
			t.Fatal(err)
		}
		c := jwt.MapClaims{}
		if _, _, err := jwt.NewParser().ParseUnverified(token, c); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]time.Time{"iat": testNow, "nbf": testNow, "exp": testNow.Add(tt.want)} {
			if got, ok := c[name].(float64); !ok || int64(got) != want.Unix() {
				t.Errorf("ttl %s: %s = %v, want %d", tt.ttl, name, c[name], want.Unix())
			}
		}
	}

	// The exported form uses the wall clock, so its token verifies now and
	// not after its TTL (plus leeway) has passed.
	token, err := MintHS256(testSecret, MintClaims{Tenant: "acme", Role: ReadOnly, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	a := newTestAuth(t, Config{Mode: ModeJWT, Secret: testSecret})
	a.now = time.Now
	if _, err := a.Authenticate(bearerRequest(token)); err != nil {
		t.Errorf("fresh token: %v", err)
	}
	a.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if _, err := a.Authenticate(bearerRequest(token)); err != ErrTokenExpired {
		t.Errorf("after TTL: err = %v, want %v", err, ErrTokenExpired)
	}
}

func TestMintErrors(t *testing.T) {
	tests := []struct {
		name    string
		secret  []byte
		c       MintClaims
		wantErr string
	}{
		{name: "short secret", secret: []byte("short"), c: MintClaims{Tenant: "acme", Role: ReadWrite}, wantErr: "at least 32"},
		{name: "no tenant", secret: testSecret, c: MintClaims{Role: Admin}, wantErr: "must name its tenant"},
		{name: "no role", secret: testSecret, c: MintClaims{Tenant: "acme"}, wantErr: "role must be"},
		{name: "bad role", secret: testSecret, c: MintClaims{Tenant: "acme", Role: Admin + 1}, wantErr: "role must be"},
		{name: "negative ttl", secret: testSecret, c: MintClaims{Tenant: "acme", Role: ReadWrite, TTL: -time.Second}, wantErr: "negative TTL"},
		{name: "tenant claim clash", secret: testSecret, c: MintClaims{Role: ReadWrite, Tenant: "acme", TenantClaim: "sub"}, wantErr: "taken by another claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := MintHS256(tt.secret, tt.c)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("MintHS256() error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
