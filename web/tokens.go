package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard/switchboard/accounts"
)

const tokenTTL = 24 * time.Hour

// Principal is the authenticated caller of a request. Role is the account's
// role as stored when the request arrived, never the token's claim.
type Principal struct {
	UserID string
	Role   string
	// KeyID and Scopes are set when the caller sent an API key.
	KeyID  string
	Scopes []string
}

// IsAdmin reports whether the caller has the admin role.
func (p Principal) IsAdmin() bool { return p.Role == accounts.RoleAdmin }

type claims struct {
	Role string `json:"role"`
	jwt.RegisteredClaims
}

// tokens issues and verifies HS256 access tokens: sub is the user id, role
// the user's role when it was issued (for the client to read: the server
// reads the account on every request instead); they last 24 h and every
// replica accepts them (one secret).
type tokens struct {
	secret []byte
}

const tokenIssuer = "switchboard"

func (t tokens) issue(userID, role string, now time.Time) (string, time.Time, error) {
	exp := now.Add(tokenTTL).UTC().Truncate(time.Second)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{
		Role: role,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject: userID, Issuer: tokenIssuer,
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
		},
	})
	s, err := tok.SignedString(t.secret)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign token: %w", err)
	}
	return s, exp, nil
}

func (t tokens) verify(raw string) (Principal, error) {
	var c claims
	_, err := jwt.ParseWithClaims(raw, &c, func(*jwt.Token) (any, error) { return t.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(tokenIssuer), jwt.WithExpirationRequired(), jwt.WithLeeway(5*time.Second))
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Principal{}, errors.New("the access token has expired; log in again")
	case err != nil:
		return Principal{}, errors.New("the access token is invalid")
	case c.Subject == "" || !accounts.ValidRole(c.Role):
		return Principal{}, errors.New("the access token is invalid")
	}
	return Principal{UserID: c.Subject}, nil
}

type principalKey struct{}

// authenticate is Huma middleware: operations that declare the bearer
// security requirement need a valid token or API key (sbk_…); the principal
// (its user id) goes in the context. For a user token checkAccount, after
// the per-user rate limit, completes it; an API key's lookup has read the
// owner's account already.
func (s *Server) authenticate(ctx huma.Context, next func(huma.Context)) {
	if len(ctx.Operation().Security) == 0 {
		next(ctx)
		return
	}
	raw, ok := bearerToken(ctx.Header("Authorization"))
	if !ok {
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="switchboard"`)
		_ = huma.WriteErr(s.api, ctx, http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <token from /v1/auth/login>")
		return
	}
	var p Principal
	var err error
	if strings.HasPrefix(raw, accounts.APIKeyPrefix) {
		var refused *accounts.RefusedError
		if p, err = s.apiKeyPrincipal(ctx.Context(), raw); err != nil && !errors.As(err, &refused) {
			_ = huma.WriteErr(s.api, ctx, http.StatusInternalServerError, "internal error; the request id is "+requestIDFrom(ctx.Context()))
			return
		}
	} else {
		p, err = s.tokens.verify(raw)
	}
	if err != nil {
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="switchboard", error="invalid_token"`)
		_ = huma.WriteErr(s.api, ctx, http.StatusUnauthorized, err.Error())
		return
	}
	next(huma.WithValue(ctx, principalKey{}, p))
}

// checkAccount is Huma middleware after authenticate: it reads the caller's
// account on every request, so a deleted or disabled account's tokens stop
// working at once on every replica, and a role granted or revoked counts
// from the next request on.
func (s *Server) checkAccount(ctx huma.Context, next func(huma.Context)) {
	p, ok := ctx.Context().Value(principalKey{}).(Principal)
	if !ok || p.KeyID != "" {
		next(ctx)
		return
	}
	role, err := s.activeRole(ctx.Context(), p.UserID)
	var refused *accounts.RefusedError
	switch {
	case errors.As(err, &refused):
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="switchboard", error="invalid_token"`)
		_ = huma.WriteErr(s.api, ctx, http.StatusUnauthorized, refused.Error())
		return
	case err != nil:
		_ = huma.WriteErr(s.api, ctx, http.StatusInternalServerError, "internal error; the request id is "+requestIDFrom(ctx.Context()))
		return
	}
	p.Role = role
	next(huma.WithValue(ctx, principalKey{}, p))
}

// activeRole is accounts.ActiveRole, logging an unexpected error once.
func (s *Server) activeRole(ctx context.Context, userID string) (string, error) {
	role, err := accounts.ActiveRole(ctx, s.opts.Pool, userID)
	s.logUnexpected(ctx, "read the caller's account", err)
	return role, err
}

// logUnexpected logs an error that is neither a refusal (the caller's
// fault, answered 401) nor a cancelled request.
func (s *Server) logUnexpected(ctx context.Context, msg string, err error) {
	var refused *accounts.RefusedError
	if err != nil && !errors.As(err, &refused) && !errors.Is(err, context.Canceled) {
		s.opts.Logger.ErrorContext(ctx, msg, "error", err)
	}
}

// requireAdmin is Huma middleware after checkAccount: operator routes
// (/v1/admin/*, /v1/cluster/*) answer 403 to anyone but an admin before
// their path or body is looked at, so a non-admin learns nothing from a 422.
func (s *Server) requireAdmin(ctx huma.Context, next func(huma.Context)) {
	if !isOperatorPath(ctx.Operation().Path) || principal(ctx.Context()).IsAdmin() {
		next(ctx)
		return
	}
	_ = huma.WriteErr(s.api, ctx, http.StatusForbidden, adminOnly)
}

// isOperatorPath reports whether a route is for admins only.
func isOperatorPath(path string) bool {
	return strings.HasPrefix(path, "/v1/admin/") || strings.HasPrefix(path, "/v1/cluster/")
}

// principal returns the caller of an authenticated operation.
func principal(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// bearerToken takes the token out of an Authorization header; the scheme
// name is case-insensitive (RFC 9110 §11.1).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// expiry is when a valid token expires.
func (t tokens) expiry(raw string) (time.Time, error) {
	var c claims
	_, err := jwt.ParseWithClaims(raw, &c, func(*jwt.Token) (any, error) { return t.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithIssuer(tokenIssuer), jwt.WithExpirationRequired())
	if err != nil || c.ExpiresAt == nil {
		return time.Time{}, errors.New("the access token is invalid")
	}
	return c.ExpiresAt.Time, nil
}
