// Package auth authenticates the broker's HTTP requests with JWTs and
// decides what each caller may do.
//
// A verified token yields an Identity: the subject, the tenant the request
// acts for, and an access Level. Levels nest (admin ⊇ read-write ⊇
// read-only), so a route only states the lowest level it needs.
package auth

import (
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Level is an access level. The zero value, None, grants nothing.
type Level int

const (
	None Level = iota
	ReadOnly
	ReadWrite
	Admin
)

// String returns the level's role name, as written in a token.
func (l Level) String() string {
	switch l {
	case ReadOnly:
		return "read-only"
	case ReadWrite:
		return "read-write"
	case Admin:
		return "admin"
	default:
		return "none"
	}
}

// ParseLevel parses a role name: "read-only", "read-write" or "admin".
func ParseLevel(s string) (Level, error) {
	switch s {
	case "read-only":
		return ReadOnly, nil
	case "read-write":
		return ReadWrite, nil
	case "admin":
		return Admin, nil
	default:
		return None, fmt.Errorf("unknown access level %q (want read-only, read-write or admin)", s)
	}
}

// DefaultTenant is the tenant of every request when tenancy is off, and of
// a token that names no tenant when it is on.
const DefaultTenant = "default"

// Identity is who a request acts as.
type Identity struct {
	Subject string
	Tenant  string
	Level   Level
}

// Modes of Config.Mode.
const (
	ModeOff = "off"
	ModeJWT = "jwt"
)

const (
	// DefaultLeeway absorbs clock skew between the token issuer and the
	// broker replicas.
	DefaultLeeway = 30 * time.Second
	// DefaultTenantClaim is the claim that names the tenant.
	DefaultTenantClaim = "tenant"
	// minSecretLen follows RFC 7518 §3.2: an HS256 key must be at least as
	// long as the hash output.
	minSecretLen = 32
	// minRSABits refuses keys that are too weak to be worth verifying with.
	minRSABits = 2048
)

// Config configures an Authenticator.
type Config struct {
	// Mode is ModeOff (also the empty string) or ModeJWT.
	Mode string
	// Secret is the HS256 shared secret, at least 32 bytes.
	Secret []byte
	// PublicKeyPEM is an RSA (RS256) or Ed25519 (EdDSA) public key in PEM,
	// either PKIX "PUBLIC KEY" or, for RSA, PKCS #1 "RSA PUBLIC KEY".
	// Exactly one of Secret and PublicKeyPEM is set in ModeJWT.
	PublicKeyPEM []byte
	// Issuer and Audience, when set, must match the token's iss and aud.
	Issuer   string
	Audience string
	// Leeway is the clock skew tolerated on exp, nbf and iat. Zero means
	// DefaultLeeway.
	Leeway time.Duration
	// Tenancy makes the tenant come from the token; without it every
	// request is on DefaultTenant.
	Tenancy bool
	// TenantClaim names the tenant claim. Empty means DefaultTenantClaim.
	TenantClaim string
}

// Authenticator verifies requests. It is safe for concurrent use.
type Authenticator struct {
	off         bool
	key         any
	alg         string
	parser      *jwt.Parser
	issuer      string
	audience    string
	tenancy     bool
	tenantClaim string
	now         func() time.Time // swapped by tests to probe leeway edges
}

// New validates cfg and returns an Authenticator.
func New(cfg Config) (*Authenticator, error) {
	switch cfg.Mode {
	case "", ModeOff:
		return &Authenticator{off: true}, nil
	case ModeJWT:
	default:
		return nil, fmt.Errorf("auth: unknown mode %q (want %q or %q)", cfg.Mode, ModeOff, ModeJWT)
	}

	a := &Authenticator{
		issuer:      cfg.Issuer,
		audience:    cfg.Audience,
		tenancy:     cfg.Tenancy,
		tenantClaim: cfg.TenantClaim,
		now:         time.Now,
	}
	if a.tenantClaim == "" {
		a.tenantClaim = DefaultTenantClaim
	}

	switch {
	case len(cfg.Secret) > 0 && len(cfg.PublicKeyPEM) > 0:
		return nil, errors.New("auth: jwt mode takes either a secret or a public key, not both")
	case len(cfg.Secret) > 0:
		if len(cfg.Secret) < minSecretLen {
			return nil, fmt.Errorf("auth: HS256 secret is %d bytes, need at least %d", len(cfg.Secret), minSecretLen)
		}
		a.key, a.alg = cfg.Secret, jwt.SigningMethodHS256.Alg()
	case len(cfg.PublicKeyPEM) > 0:
		var err error
		if a.key, a.alg, err = parsePublicKey(cfg.PublicKeyPEM); err != nil {
			return nil, fmt.Errorf("auth: public key: %w", err)
		}
	default:
		return nil, errors.New("auth: jwt mode needs a secret or a public key")
	}

	leeway := cfg.Leeway
	switch {
	case leeway < 0:
		return nil, fmt.Errorf("auth: negative leeway %s", leeway)
	case leeway == 0:
		leeway = DefaultLeeway
	}

	// Pinning the one algorithm that matches the key is what stops alg
	// confusion: a token may not pick how it is verified.
	a.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{a.alg}),
		jwt.WithLeeway(leeway),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(func() time.Time { return a.now() }),
	)
	return a, nil
}

// parsePublicKey returns the verification key and the only algorithm it may
// verify.
func parsePublicKey(data []byte) (any, string, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, "", errors.New("no PEM block found")
	}
	var key any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
		return nil, "", fmt.Errorf("PEM block is a %s; the broker needs only the public key", block.Type)
	default:
		return nil, "", fmt.Errorf("unsupported PEM block type %q (want PUBLIC KEY or RSA PUBLIC KEY)", block.Type)
	}
	if err != nil {
		return nil, "", fmt.Errorf("parse %s: %w", block.Type, err)
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return nil, "", fmt.Errorf("RSA key is %d bits, need at least %d", k.N.BitLen(), minRSABits)
		}
		return k, jwt.SigningMethodRS256.Alg(), nil
	case ed25519.PublicKey:
		return k, jwt.SigningMethodEdDSA.Alg(), nil
	default:
		return nil, "", fmt.Errorf("unsupported key type %T (want RSA or Ed25519)", key)
	}
}
