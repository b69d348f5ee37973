package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

const (
	// DefaultJWKSRefresh is how often the JWK Set is fetched again. Key
	// rotation does not wait for it: an unknown key ID fetches at once.
	DefaultJWKSRefresh = time.Hour
	// UnknownKIDRefetchEvery bounds the fetches that tokens naming unknown
	// key IDs cause, so that a stream of made-up key IDs cannot turn the
	// broker against its identity provider.
	UnknownKIDRefetchEvery = 10 * time.Second
	// jwksFetchTimeout bounds one fetch of the JWK Set.
	jwksFetchTimeout = 10 * time.Second
)

// ErrUnknownKey: the token names a key the identity provider does not
// publish, even after a fetch.
var ErrUnknownKey = errors.New("unknown signing key")

// jwks is an identity provider's JWK Set. jwkset fetches and parses it
// into keys, and keyfunc picks a token's key by its kid; both write into
// the one store, so a fetch that fails leaves the keys as they were.
type jwks struct {
	url     string
	client  *http.Client
	every   time.Duration
	log     *slog.Logger
	keys    *jwkset.MemoryJWKSet
	keyfunc keyfunc.Keyfunc
}

func newJWKS(url string, every time.Duration, onFetch func(ok bool), log *slog.Logger) (*jwks, error) {
	if every < 0 {
		return nil, fmt.Errorf("negative JWKS refresh interval %s", every)
	}
	j := &jwks{url: url, every: every, log: log, keys: jwkset.NewMemoryStorage()}
	// Counted at the transport, which every fetch crosses: at start, on
	// the refresh interval, and jwkset's own on an unknown key ID.
	j.client = &http.Client{Timeout: jwksFetchTimeout, Transport: counted{http.DefaultTransport, onFetch}}
	if j.every == 0 {
		j.every = DefaultJWKSRefresh
	}
	// An identity provider that is down when the broker starts must not
	// keep the broker down: its tokens are refused until a fetch succeeds.
	fetched, err := j.fetch(context.Background(), true)
	if err != nil {
		return nil, err
	}
	client, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{url: fetched},
		RefreshUnknownKID: rate.NewLimiter(rate.Every(UnknownKIDRefetchEvery), 1),
		// A request waits this long at most for the limiter; past it, its
		// token is refused at once.
		RateLimitWaitMax: 100 * time.Millisecond,
	})
	if err != nil {
		return nil, fmt.Errorf("JWKS client: %w", err)
	}
	j.keyfunc, err = keyfunc.New(keyfunc.Options{
		Storage: client,
		// A key published for encryption ("use": "enc") signs nothing.
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""},
	})
	if err != nil {
		return nil, fmt.Errorf("JWKS keyfunc: %w", err)
	}
	return j, nil
}

// fetch reads the JWK Set into j.keys. With tolerant, a failure is logged
// and the store returned anyway (still empty at start).
func (j *jwks) fetch(ctx context.Context, tolerant bool) (jwkset.Storage, error) {
	s, err := jwkset.NewStorageFromHTTP(j.url, jwkset.HTTPClientStorageOptions{
		Ctx:                       ctx,
		HTTPTimeout:               jwksFetchTimeout,
		Client:                    j.client,
		Storage:                   j.keys,
		NoErrorReturnFirstHTTPReq: tolerant,
		RefreshErrorHandler: func(_ context.Context, err error) {
			j.log.Warn("fetching the JWK Set failed; the keys are unchanged", "url", j.url, "err", err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("JWKS %s: %w", j.url, err)
	}
	return s, nil
}

// Run fetches the JWK Set every refresh interval until ctx ends. Without a
// JWK Set it returns at once.
func (a *Authenticator) Run(ctx context.Context) {
	if a.jwks == nil {
		return
	}
	t := time.NewTicker(a.jwks.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := a.jwks.fetch(ctx, false); err != nil && ctx.Err() == nil {
				a.jwks.log.Warn("refreshing the JWK Set failed; the keys are unchanged", "err", err)
			}
		}
	}
}

// keyFor returns the key that verifies tok, and refuses a token whose alg
// is not the key's own.
func (j *jwks) keyFor(ctx context.Context, tok *jwt.Token) (any, error) {
	key, err := j.keyfunc.KeyfuncCtx(ctx)(tok)
	if err != nil {
		// keyfunc refuses both a key ID it cannot find and a key whose
		// published alg or use forbids this token; only the store tells
		// them apart.
		if kid, ok := tok.Header["kid"].(string); ok {
			if _, rerr := j.keys.KeyRead(ctx, kid); rerr == nil {
				return nil, ErrUnexpectedAlgorithm
			}
		}
		return nil, ErrUnknownKey
	}
	if set, ok := key.(jwt.VerificationKeySet); ok {
		// A token without a kid is tried against the keys of its alg.
		var fit jwt.VerificationKeySet
		for _, k := range set.Keys {
			if alg, err := algOf(k); err == nil && alg == tok.Method.Alg() {
				fit.Keys = append(fit.Keys, k)
			}
		}
		if len(fit.Keys) == 0 {
			return nil, ErrUnknownKey
		}
		return fit, nil
	}
	if alg, err := algOf(key); err != nil || alg != tok.Method.Alg() {
		return nil, ErrUnexpectedAlgorithm
	}
	return key, nil
}

// counted tells fetched whether each request was answered 200.
type counted struct {
	next    http.RoundTripper
	fetched func(ok bool)
}

func (c counted) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if c.fetched != nil {
		c.fetched(err == nil && resp.StatusCode == http.StatusOK)
	}
	return resp, err
}
