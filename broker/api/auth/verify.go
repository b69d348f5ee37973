package auth

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// Authentication failures. Their text is what a 401 body says, so it names
// the problem and never carries any part of the token.
var (
	ErrMissingToken        = errors.New("missing bearer token")
	ErrMalformedToken      = errors.New("malformed token")
	ErrUnexpectedAlgorithm = errors.New("unexpected signing algorithm")
	ErrInvalidSignature    = errors.New("invalid signature")
	ErrTokenExpired        = errors.New("token expired")
	ErrTokenNotValidYet    = errors.New("token not valid yet")
	ErrTokenIssuedInFuture = errors.New("token issued in the future")
	ErrInvalidIssuer       = errors.New("invalid issuer")
	ErrInvalidAudience     = errors.New("invalid audience")
	ErrInvalidClaims       = errors.New("invalid claims")
	ErrNotConfigured       = errors.New("authentication not configured")
)

// ErrMissingTenant is a verified token that names no tenant, with tenancy
// on and no default token tenant. The caller is known, so Require answers
// 403, not 401. The error Authenticate returns wraps it with the name of
// the claim the token lacks.
var ErrMissingTenant = errors.New("missing tenant claim")

// offIdentity is what every request is when auth is off: all on one tenant,
// with nothing to forbid.
var offIdentity = Identity{Tenant: DefaultTenant, Level: Admin}

// Authenticate verifies the request's bearer token and returns who it acts
// as. A valid token without a recognised role yields Level None, which is
// not an authentication failure: the caller is known but may do nothing.
func (a *Authenticator) Authenticate(r *http.Request) (Identity, error) {
	if a == nil {
		return Identity{}, ErrNotConfigured
	}
	if a.off {
		return offIdentity, nil
	}

	raw, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return Identity{}, ErrMissingToken
	}

	claims := jwt.MapClaims{}
	tok, err := a.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		// The parser has already refused an alg outside a.algs, so an
		// HS256 token is here only with a secret, and any other only with a
		// public key or a JWK Set.
		switch {
		case t.Method.Alg() == jwt.SigningMethodHS256.Alg():
			return a.secret, nil
		case a.jwks != nil:
			return a.jwks.keyFor(r.Context(), t)
		default:
			return a.key, nil
		}
	})
	if err != nil {
		return Identity{}, a.classify(tok, err)
	}
	rules := a.rules
	if tok.Method.Alg() == jwt.SigningMethodHS256.Alg() {
		rules = a.ownRules
	}
	if err := rules.checkIssuerAudience(claims); err != nil {
		return Identity{}, err
	}
	return a.identity(claims, rules)
}

// bearerToken extracts the token from an Authorization header. The scheme
// is case-insensitive (RFC 7235).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// classify maps the library's error onto one of ours. The library's own
// text is dropped: some of it quotes fragments of the token.
func (a *Authenticator) classify(tok *jwt.Token, err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return ErrMalformedToken
	case tok != nil && tok.Method != nil && !slices.Contains(a.algs, tok.Method.Alg()),
		errors.Is(err, ErrUnexpectedAlgorithm):
		return ErrUnexpectedAlgorithm
	case errors.Is(err, ErrUnknownKey):
		return ErrUnknownKey
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// An alg header that is absent or names no known method.
		return ErrUnexpectedAlgorithm
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return ErrInvalidSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		return ErrTokenExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return ErrTokenNotValidYet
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return ErrTokenIssuedInFuture
	default:
		return ErrInvalidClaims
	}
}

// checkIssuerAudience is done here rather than by the library so that a
// missing iss or aud reads as invalid, like a wrong one, instead of as a
// generic missing claim.
func (r claimRules) checkIssuerAudience(claims jwt.MapClaims) error {
	if r.issuer != "" {
		if iss, err := claims.GetIssuer(); err != nil || iss != r.issuer {
			return ErrInvalidIssuer
		}
	}
	if r.audience != "" {
		aud, err := claims.GetAudience()
		if err != nil {
			return ErrInvalidAudience
		}
		for _, v := range aud {
			if v == r.audience {
				return nil
			}
		}
		return ErrInvalidAudience
	}
	return nil
}

func (a *Authenticator) identity(claims jwt.MapClaims, rules claimRules) (Identity, error) {
	sub, err := claims.GetSubject()
	if err != nil {
		return Identity{}, fmt.Errorf("%w: sub must be a string", ErrInvalidClaims)
	}
	id := Identity{Subject: sub, Tenant: DefaultTenant, Level: levelOf(claims, rules)}
	if !a.tenancy {
		return id, nil
	}
	claim := claimAt(claims, rules.tenant)
	tenant, ok := claim.(string)
	if !ok && claim != nil {
		// Falling back to another tenant here would let a malformed claim
		// land a request on someone else's data.
		return Identity{}, fmt.Errorf("%w: %s must be a string", ErrInvalidClaims, rules.tenant)
	}
	switch {
	case tenant != "":
		id.Tenant = tenant
	case a.noTenant != "":
		id.Tenant = a.noTenant
	default:
		return Identity{}, fmt.Errorf("%w %q: with tenancy on, a token must name its tenant", ErrMissingTenant, rules.tenant)
	}
	return id, nil
}

// claimAt returns the claim called name or, when there is none, the claim
// the dotted path name reaches through nested objects: an identity provider
// may nest its roles ("realm_access.roles" in Keycloak), and a claim name
// may itself hold dots (a namespaced URL, as Auth0 wants).
func claimAt(claims jwt.MapClaims, name string) any {
	if v, ok := claims[name]; ok {
		return v
	}
	var v any = map[string]any(claims)
	for part := range strings.SplitSeq(name, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[part]
	}
	return v
}

// levelOf returns the highest level named by the role claims, each a
// string or an array of strings. Anything unrecognised is skipped: ignoring
// a grant can only lower the level, never raise it.
func levelOf(claims jwt.MapClaims, rules claimRules) Level {
	best := None
	consider := func(v any) {
		if s, ok := v.(string); ok {
			if l := rules.levels[s]; l > best {
				best = l
			}
		}
	}
	for _, name := range rules.roles {
		switch roles := claimAt(claims, name).(type) {
		case []any:
			for _, r := range roles {
				consider(r)
			}
		case string:
			consider(roles)
		}
	}
	return best
}
