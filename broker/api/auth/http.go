package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
)

type ctxKey struct{}

// Require admits a request whose identity holds at least level, stores the
// identity in the request context and calls next. Otherwise it answers 401
// when the caller could not be authenticated and 403 when the caller is
// known but lacks the level or names no tenant.
func (a *Authenticator) Require(level Level, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := a.Authenticate(r)
		switch {
		case errors.Is(err, ErrNotConfigured):
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		case errors.Is(err, ErrMissingTenant):
			writeError(w, http.StatusForbidden, err.Error())
			return
		case err != nil:
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		case id.Level < level:
			writeError(w, http.StatusForbidden, "Insufficient permissions")
			return
		}
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
	})
}

// WithIdentity returns a context carrying id. Require uses it; handler tests
// can use it to act as a tenant without minting a token.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the identity stored by Require. Without one it
// returns the auth-off identity (tenant "default", admin), so a handler
// never sees an empty tenant; routes that need protection must be wrapped
// by Require.
func FromContext(ctx context.Context) Identity {
	if id, ok := ctx.Value(ctxKey{}).(Identity); ok {
		return id
	}
	return offIdentity
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// Encoding a map of one string cannot fail; a write error means the
	// client is gone and there is no one left to tell.
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
