package chart_test

import (
	"testing"

	"github.com/regent-mq/regent/test/chart"
)

func TestTheIdentityProvidersJWKSURLAndClaimNamesReachTheBroker(t *testing.T) {
	objs := chart.Template(t,
		"--set", "auth.identityProvider.jwksUrl=https://keycloak.example/realms/acme/protocol/openid-connect/certs",
		"--set", "auth.identityProvider.jwksRefreshInterval=15m",
		"--set", "auth.identityProvider.issuer=https://keycloak.example/realms/acme",
		"--set", "auth.identityProvider.audience=regent",
		"--set", "auth.identityProvider.claims.roles=realm_access.roles",
		"--set", "auth.identityProvider.claims.tenant=org",
		"--set", "auth.identityProvider.roleValues.admin=platform-team")
	e := env(container(t, deployment(t, objs, chart.Broker), "broker"))
	want := map[string]string{
		"REGENT_JWKS_URL":              "https://keycloak.example/realms/acme/protocol/openid-connect/certs",
		"REGENT_JWKS_REFRESH_INTERVAL": "15m",
		"REGENT_JWT_ISSUER":            "https://keycloak.example/realms/acme",
		"REGENT_JWT_AUDIENCE":          "regent",
		"REGENT_TENANT_CLAIM":          "org",
		"REGENT_ROLE_CLAIM":            "role",
		"REGENT_ROLES_CLAIM":           "realm_access.roles",
		"REGENT_ROLE_READ_ONLY":        "read-only",
		"REGENT_ROLE_READ_WRITE":       "read-write",
		"REGENT_ROLE_ADMIN":            "platform-team",
	}
	for name, v := range want {
		if got := e[name].Value; got != v {
			t.Errorf("broker %s = %q, want %q", name, got, v)
		}
	}
	// The operator's own tokens stay HS256 tokens of the signing secret.
	if _, ok := e["REGENT_JWT_SECRET_FILE"]; !ok {
		t.Error("with an identity provider the broker lost the signing secret the operator's tokens need")
	}
}

func TestWithoutAnIdentityProviderTheBrokerGetsNoJWKSSettings(t *testing.T) {
	e := env(container(t, deployment(t, chart.Template(t), chart.Broker), "broker"))
	for _, name := range []string{"REGENT_JWKS_URL", "REGENT_JWT_ISSUER", "REGENT_ROLES_CLAIM"} {
		if _, ok := e[name]; ok {
			t.Errorf("%s is set with no identity provider", name)
		}
	}
}

func TestSchemaRejectsAJWKSURLThatIsNotHTTP(t *testing.T) {
	refused(t, []string{"auth.identityProvider.jwksUrl=keycloak:8080/certs"}, schemaRefusal, "/auth/identityProvider/jwksUrl")
}

func TestAnIdentityProviderWithoutJWTAuthIsRefused(t *testing.T) {
	refused(t, []string{"auth.identityProvider.jwksUrl=https://idp.example/jwks.json", "auth.mode=off"}, "auth.identityProvider.jwksUrl needs auth.mode=jwt")
}
