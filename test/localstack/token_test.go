package localstack_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/test/localstack"
)

// A token minted for the local stack (what `regent-local token` prints, and
// the default tenant's admin token `make run` writes) is signed with the
// stack's secret, and names the tenant and level it was asked for: a
// tenant-acme token for the acme sample, and the default tenant by name,
// since the broker refuses a token without the tenant claim.
func TestALocalTokenCarriesItsTenantAndLevel(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("0123456789abcdef0123456789abcdef")
	if err := os.WriteFile(filepath.Join(dir, "signing-secret"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{Mode: auth.ModeJWT, Secret: secret, Tenancy: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []auth.Identity{
		{Subject: "local-read-write", Tenant: "acme", Level: auth.ReadWrite},
		{Subject: "local-read-only", Tenant: auth.DefaultTenant, Level: auth.ReadOnly},
	} {
		tok, err := localstack.Token(dir, want.Tenant, want.Level, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		got, err := a.Authenticate(r)
		if err != nil || got != want {
			t.Errorf("token for %+v authenticates as %+v, %v", want, got, err)
		}
		claims := jwt.MapClaims{}
		if _, _, err := jwt.NewParser().ParseUnverified(tok, claims); err != nil || claims["tenant"] != want.Tenant {
			t.Errorf("token for %+v has the claims %v (%v), want tenant %q", want, claims, err, want.Tenant)
		}
	}
}
