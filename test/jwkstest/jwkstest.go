// Package jwkstest runs an identity provider's JWK Set endpoint for tests:
// a real HTTP server on 127.0.0.1 that publishes the public halves of
// signing keys and can rotate them while a test runs, and the keys' private
// halves to sign tokens with.
package jwkstest

import (
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// Key is a signing key with its key ID.
type Key struct {
	KID    string
	Method jwt.SigningMethod
	Signer crypto.Signer
	// HideAlg publishes the key without its alg, as some providers do, so
	// that the verifier must take the algorithm from the key's type.
	HideAlg bool
	// Use is the key's published use; empty publishes "sig". NoUse
	// publishes none, as some providers do.
	Use   jwkset.USE
	NoUse bool
}

// NewKey generates a key for alg: RS256, ES256 or EdDSA.
func NewKey(t testing.TB, alg, kid string) Key {
	t.Helper()
	k, err := GenerateKey(alg, kid)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// GenerateKey is NewKey outside a test, for a provider that outlives one.
func GenerateKey(alg, kid string) (Key, error) {
	var (
		s   crypto.Signer
		err error
	)
	switch alg {
	case "RS256":
		s, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		s, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		_, s, err = ed25519.GenerateKey(rand.Reader)
	default:
		return Key{}, fmt.Errorf("jwkstest: no key for alg %q", alg)
	}
	if err != nil {
		return Key{}, fmt.Errorf("jwkstest: generate %s key: %w", alg, err)
	}
	return Key{KID: kid, Method: jwt.GetSigningMethod(alg), Signer: s}, nil
}

// Sign signs claims with k, naming k's key ID in the header.
func (k Key) Sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	return Forge(t, k.Method, k.KID, k.Signer, claims)
}

// Server publishes a JWK Set at URL.
type Server struct {
	URL     string
	mu      sync.Mutex
	body    []byte
	fetches atomic.Int64
	down    atomic.Bool
}

// Start serves the public halves of keys until the test ends.
func Start(t testing.TB, keys ...Key) *Server {
	t.Helper()
	s, stop, err := Serve(keys...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s
}

// Serve is Start outside a test, for a provider that the tests of a
// package share: it serves until stop.
func Serve(keys ...Key) (s *Server, stop func(), err error) {
	s = &Server{}
	if err := s.publish(keys); err != nil {
		return nil, nil, err
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		if s.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		s.mu.Lock()
		body := s.body
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	s.URL = srv.URL + "/.well-known/jwks.json"
	return s, srv.Close, nil
}

// Publish replaces the published keys: a rotation.
func (s *Server) Publish(t testing.TB, keys ...Key) {
	t.Helper()
	if err := s.publish(keys); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) publish(keys []Key) error {
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for _, k := range keys {
		meta := jwkset.JWKMetadataOptions{KID: k.KID, USE: cmp.Or(k.Use, jwkset.UseSig)}
		if k.NoUse {
			meta.USE = ""
		}
		if !k.HideAlg {
			meta.ALG = jwkset.ALG(k.Method.Alg())
		}
		jwk, err := jwkset.NewJWKFromKey(k.Signer.Public(), jwkset.JWKOptions{Metadata: meta})
		if err != nil {
			return fmt.Errorf("jwkstest: JWK of %s: %w", k.KID, err)
		}
		m := jwk.Marshal()
		if k.HideAlg {
			m.ALG = ""
		}
		set.Keys = append(set.Keys, m)
	}
	body, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("jwkstest: marshal JWK Set: %w", err)
	}
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
	return nil
}

// Down makes the server answer 503, as a provider that is down does, until
// Down(false).
func (s *Server) Down(down bool) { s.down.Store(down) }

// Fetches is how many times the set was fetched.
func (s *Server) Fetches() int64 { return s.fetches.Load() }

// Forge signs claims with method and key, naming kid unless it is empty:
// the tokens an
// attacker makes, such as an HS256 token keyed with a published public key
// (key is then its bytes) or an unsigned one (jwt.SigningMethodNone with
// jwt.UnsafeAllowNoneSignatureType).
func Forge(t testing.TB, method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("jwkstest: forge %s token: %v", method.Alg(), err)
	}
	return s
}
