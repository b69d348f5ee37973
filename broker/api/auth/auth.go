// Package auth authenticates the broker's HTTP requests with JWTs and
// decides what each caller may do.
//
// A verified token yields an Identity: the subject, the tenant the request
// acts for, and an access Level. Levels nest (admin ⊇ read-write ⊇
// read-only), so a route only states the lowest level it needs.
package auth

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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

// DefaultTenant is the tenant of every request when tenancy is off.
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
	// DefaultRoleClaim and DefaultRolesClaim carry the access level, as
	// Queen reads it: a role string and a roles array.
	DefaultRoleClaim  = "role"
	DefaultRolesClaim = "roles"
	// AlgorithmAuto takes the algorithm from the key, as Queen's
	// JWT_ALGORITHM=auto does.
	AlgorithmAuto = "auto"
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
	// PublicKeyPEM is an RSA (RS256), ECDSA P-256 (ES256) or Ed25519
	// (EdDSA) public key in PEM, either PKIX "PUBLIC KEY" or, for RSA,
	// PKCS #1 "RSA PUBLIC KEY".
	PublicKeyPEM []byte
	// JWKSURL is an identity provider's JWK Set, fetched at New, every
	// JWKSRefresh (zero means DefaultJWKSRefresh) while Run runs, and again,
	// rate-limited, when a token names a key ID it does not hold.
	// ModeJWT needs a Secret, a PublicKeyPEM or a JWKSURL. A Secret may
	// come with either of the others: HS256 tokens, such as the operator
	// mints in the cluster, are verified with the secret, and every other
	// token with the public keys. A public key never verifies an HMAC
	// token, which is what alg confusion needs.
	JWKSURL     string
	JWKSRefresh time.Duration
	// JWKSFetched, when set, is told of every fetch of the JWK Set: ok
	// when it answered 200.
	JWKSFetched func(ok bool)
	// Algorithm is AlgorithmAuto (also the empty string), which accepts
	// the algorithm of the key, or one of HS256, RS256, ES256 and EdDSA,
	// which must also be the key's.
	Algorithm string
	// Issuer and Audience, when set, must match the token's iss and aud
	// (with a secret next to public keys, only the public keys' tokens').
	Issuer   string
	Audience string
	// Leeway is the clock skew tolerated on exp, nbf and iat. Zero means
	// DefaultLeeway.
	Leeway time.Duration
	// Tenancy makes the tenant come from the token; without it every
	// request is on DefaultTenant.
	Tenancy bool
	// TenantClaim names the tenant claim. Empty means DefaultTenantClaim.
	// RoleClaim and RolesClaim name the claims that carry the access level;
	// empty means DefaultRoleClaim and DefaultRolesClaim. A claim name that
	// is not a top-level claim is read as a dotted path, so that
	// "realm_access.roles" reads Keycloak's realm roles. With a secret next
	// to a public key or a JWK Set, the names, issuer and audience are the
	// identity provider's, and the secret's tokens, minted in the cluster
	// by the operator, keep Regent's own claims: renaming the claims for
	// the provider must not move the operator's requests to another tenant.
	TenantClaim string
	RoleClaim   string
	RolesClaim  string
	// DefaultTokenTenant is the tenant of a token that names none, with
	// tenancy on (without it, it is not read). Empty refuses such a token
	// (ErrMissingTenant): an identity provider's users mostly hold a role
	// but no tenant claim, and must not all land on one tenant's data
	// unless the operator says so.
	DefaultTokenTenant string
	// RoleValues names, per level, the role a token holds to be granted
	// it, when a provider's roles are not called read-only, read-write and
	// admin (Queen's JWT_ROLE_ADMIN and the like). A level it leaves out
	// keeps its own name.
	RoleValues map[Level]string
	// Log receives the JWK Set's refresh failures. Nil means slog.Default().
	Log *slog.Logger
}

// Authenticator verifies requests. It is safe for concurrent use.
type Authenticator struct {
	off      bool
	secret   []byte   // verifies HS256 tokens, when set
	key      any      // the public key, when set
	jwks     *jwks    // the identity provider's keys, when set
	algs     []string // the algorithms a token may be signed with
	parser   *jwt.Parser
	tenancy  bool
	noTenant string           // the tenant of a token that names none; "" refuses it
	rules    claimRules       // of the tokens the public keys verify, and the secret's alone
	ownRules claimRules       // of the secret's tokens
	now      func() time.Time // swapped by tests to probe leeway edges
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
		tenancy:  cfg.Tenancy,
		noTenant: cfg.DefaultTokenTenant,
		rules: claimRules{
			issuer:   cfg.Issuer,
			audience: cfg.Audience,
			tenant:   cmp.Or(cfg.TenantClaim, DefaultTenantClaim),
			roles:    []string{cmp.Or(cfg.RoleClaim, DefaultRoleClaim), cmp.Or(cfg.RolesClaim, DefaultRolesClaim)},
		},
		now: time.Now,
	}
	var err error
	if a.rules.levels, err = roleLevels(cfg.RoleValues); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}

	if len(cfg.PublicKeyPEM) > 0 && cfg.JWKSURL != "" {
		return nil, errors.New("auth: jwt mode takes a public key or a JWKS URL, not both")
	}
	if len(cfg.Secret) > 0 {
		if len(cfg.Secret) < minSecretLen {
			return nil, fmt.Errorf("auth: HS256 secret is %d bytes, need at least %d", len(cfg.Secret), minSecretLen)
		}
		a.secret, a.algs = cfg.Secret, []string{jwt.SigningMethodHS256.Alg()}
	}
	switch {
	case len(cfg.PublicKeyPEM) > 0:
		key, alg, err := parsePublicKey(cfg.PublicKeyPEM)
		if err != nil {
			return nil, fmt.Errorf("auth: public key: %w", err)
		}
		a.key, a.algs = key, append(a.algs, alg)
	case cfg.JWKSURL != "":
		if a.jwks, err = newJWKS(cfg.JWKSURL, cfg.JWKSRefresh, cfg.JWKSFetched, cmp.Or(cfg.Log, slog.Default())); err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		a.algs = append(a.algs, publicKeyAlgs...)
	case a.secret == nil:
		return nil, errors.New("auth: jwt mode needs a secret, a public key or a JWKS URL")
	}
	a.ownRules = a.rules
	if a.secret != nil && (a.key != nil || a.jwks != nil) {
		a.ownRules = regentClaims
	}
	switch alg := cfg.Algorithm; {
	case alg == "" || alg == AlgorithmAuto:
	case slices.Contains(a.algs, alg):
		a.algs = []string{alg}
	default:
		return nil, fmt.Errorf("auth: algorithm %q does not fit the keys, which take %v (or use %q)", alg, a.algs, AlgorithmAuto)
	}

	leeway := cfg.Leeway
	switch {
	case leeway < 0:
		return nil, fmt.Errorf("auth: negative leeway %s", leeway)
	case leeway == 0:
		leeway = DefaultLeeway
	}

	// Accepting only the algorithms of the keys held is what stops alg
	// confusion: a token may not pick how it is verified. HS256 goes to
	// the secret alone, and any other alg to a key whose type is that alg's
	// (algOf).
	a.parser = jwt.NewParser(
		jwt.WithValidMethods(a.algs),
		jwt.WithLeeway(leeway),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(func() time.Time { return a.now() }),
	)
	return a, nil
}

// claimRules are the issuer and audience a token must name, when set, the
// claims its tenant and access level are read from, and the role values
// that grant each level.
type claimRules struct {
	issuer, audience string
	tenant           string
	roles            []string
	levels           map[string]Level
}

// regentClaims are the claims of Regent's own tokens (MintHS256).
var regentClaims = claimRules{
	tenant: DefaultTenantClaim,
	roles:  []string{DefaultRoleClaim, DefaultRolesClaim},
	levels: map[string]Level{ReadOnly.String(): ReadOnly, ReadWrite.String(): ReadWrite, Admin.String(): Admin},
}

// roleLevels maps each role value to the level it grants: the level's own
// name unless values renames it.
func roleLevels(values map[Level]string) (map[string]Level, error) {
	levels := map[string]Level{}
	for _, l := range []Level{ReadOnly, ReadWrite, Admin} {
		v := cmp.Or(values[l], l.String())
		if other, taken := levels[v]; taken {
			return nil, fmt.Errorf("role %q names both %s and %s", v, other, l)
		}
		levels[v] = l
	}
	return levels, nil
}

// publicKeyAlgs are the algorithms of the keys algOf accepts.
var publicKeyAlgs = []string{jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg(), jwt.SigningMethodEdDSA.Alg()}

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
	alg, err := algOf(key)
	return key, alg, err
}

// algOf returns the one algorithm key may verify. It is what decides how a
// token is checked: the token's own alg header only has to agree with it.
func algOf(key any) (string, error) {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return "", fmt.Errorf("RSA key is %d bits, need at least %d", k.N.BitLen(), minRSABits)
		}
		return jwt.SigningMethodRS256.Alg(), nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("ECDSA key is on %s, need P-256", k.Curve.Params().Name)
		}
		return jwt.SigningMethodES256.Alg(), nil
	case ed25519.PublicKey:
		return jwt.SigningMethodEdDSA.Alg(), nil
	default:
		return "", fmt.Errorf("unsupported key type %T (want RSA, ECDSA P-256 or Ed25519)", key)
	}
}
