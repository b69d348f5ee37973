package auth

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultMintTTL keeps minted tokens short-lived: the operator mints one
// per reconcile.
const DefaultMintTTL = 5 * time.Minute

// MintClaims describes a token to mint.
type MintClaims struct {
	Subject string
	// Tenant is required: with tenancy on, the broker refuses a token that
	// names no tenant, and with it off it ignores the claim, so a token of
	// Regent's always names its tenant, DefaultTenant included.
	Tenant string
	// Role is required.
	Role Level
	// TTL is the token's lifetime. Zero means DefaultMintTTL.
	TTL time.Duration
	// Issuer and Audience are set in the token when non-empty.
	Issuer   string
	Audience string
	// TenantClaim names the tenant claim. Empty means DefaultTenantClaim.
	TenantClaim string
}

// MintHS256 signs an HS256 token for c with secret. It sets iat and nbf to
// now and exp to now plus the TTL.
func MintHS256(secret []byte, c MintClaims) (string, error) {
	return mint(secret, c, time.Now())
}

func mint(secret []byte, c MintClaims, now time.Time) (string, error) {
	if len(secret) < minSecretLen {
		return "", fmt.Errorf("auth: mint: HS256 secret is %d bytes, need at least %d", len(secret), minSecretLen)
	}
	if c.Tenant == "" {
		return "", errors.New("auth: mint: a token must name its tenant")
	}
	if c.Role < ReadOnly || c.Role > Admin {
		return "", errors.New("auth: mint: role must be read-only, read-write or admin")
	}
	ttl := c.TTL
	switch {
	case ttl < 0:
		return "", fmt.Errorf("auth: mint: negative TTL %s", ttl)
	case ttl == 0:
		ttl = DefaultMintTTL
	}
	tenantClaim := c.TenantClaim
	switch tenantClaim {
	case "":
		tenantClaim = DefaultTenantClaim
	case "sub", "iss", "aud", "exp", "nbf", "iat", "jti", "role", "roles":
		return "", fmt.Errorf("auth: mint: tenant claim name %q is taken by another claim", tenantClaim)
	}

	claims := jwt.MapClaims{
		"role": c.Role.String(),
		"iat":  jwt.NewNumericDate(now),
		"nbf":  jwt.NewNumericDate(now),
		"exp":  jwt.NewNumericDate(now.Add(ttl)),
	}
	for name, v := range map[string]string{"sub": c.Subject, "iss": c.Issuer, "aud": c.Audience} {
		if v != "" {
			claims[name] = v
		}
	}
	claims[tenantClaim] = c.Tenant

	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("auth: mint: sign: %w", err)
	}
	return signed, nil
}
