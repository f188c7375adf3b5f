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
	"github.com/google/uuid"

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
	// Session is set when the caller sent a user token (or a cookie that
	// carries one), with the token's expiry: what a logout ends.
	Session      accounts.Session
	TokenExpires time.Time
	// ProjectID is the project the request acts in (projectaccess.go) and
	// ProjectRole the caller's role there: an API key's project, the
	// project X-Switchboard-Project (or a /v1/projects/{id} path) names,
	// else the account's personal project.
	ProjectID   string
	ProjectRole string
}

// IsAdmin reports whether the caller has the admin role.
func (p Principal) IsAdmin() bool { return p.Role == accounts.RoleAdmin }

type claims struct {
	Role string `json:"role"`
	// Gen is the account's token generation when the token was issued;
	// absent (0) in tokens issued before generations existed.
	Gen int `json:"gen,omitempty"`
	jwt.RegisteredClaims
}

// tokens issues and verifies HS256 access tokens: sub is the user id, role
// the user's role when it was issued (for the client to read: the server
// reads the account on every request instead), jti the token's id and gen
// the account's token generation, which the per-request account read
// checks (accounts.CheckSession); they last 24 h and every replica
// accepts them (one secret).
type tokens struct {
	secret []byte
}

const tokenIssuer = "switchboard"

func (t tokens) issue(userID, role string, generation int, now time.Time) (string, time.Time, error) {
	exp := now.Add(tokenTTL).UTC().Truncate(time.Second)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{
		Role: role, Gen: generation,
		RegisteredClaims: jwt.RegisteredClaims{
			ID: uuid.NewString(), Subject: userID, Issuer: tokenIssuer,
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
	case c.Subject == "" || !accounts.ValidRole(c.Role) || c.Gen < 0 || (c.ID != "" && uuid.Validate(c.ID) != nil):
		return Principal{}, errors.New("the access token is invalid")
	}
	jti := c.ID
	if jti == "" { // issued before tokens had ids
		jti = accounts.TokenIDOf(raw)
	}
	return Principal{
		UserID:       c.Subject,
		Session:      accounts.Session{UserID: c.Subject, TokenID: jti, Generation: c.Gen},
		TokenExpires: c.ExpiresAt.Time,
	}, nil
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
			s.writeHumaInternal(ctx, err)
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
// account and session on every request (one statement), so a deleted or
// disabled account's tokens, and tokens signed out, stop working at once
// on every replica, and a role granted or revoked counts from the next
// request on.
func (s *Server) checkAccount(ctx huma.Context, next func(huma.Context)) {
	p, ok := ctx.Context().Value(principalKey{}).(Principal)
	if !ok || p.KeyID != "" {
		next(ctx)
		return
	}
	project, bad := requestedProject(ctx)
	if bad != "" {
		_ = huma.WriteErr(s.api, ctx, http.StatusBadRequest, bad)
		return
	}
	access, err := s.checkSession(ctx.Context(), p.Session, project)
	var refused *accounts.RefusedError
	switch {
	case errors.Is(err, accounts.ErrProjectNotFound):
		_ = huma.WriteErr(s.api, ctx, http.StatusNotFound, projectNotFound)
		return
	case errors.As(err, &refused):
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="switchboard", error="invalid_token"`)
		_ = huma.WriteErr(s.api, ctx, http.StatusUnauthorized, refused.Error())
		return
	case err != nil:
		s.writeHumaInternal(ctx, err)
		return
	}
	p.Role, p.ProjectID, p.ProjectRole = access.Role, access.ProjectID, access.ProjectRole
	next(huma.WithValue(ctx, principalKey{}, p))
}

// activeRole is accounts.ActiveRole, logging an unexpected error once.
func (s *Server) activeRole(ctx context.Context, userID string) (string, error) {
	role, err := accounts.ActiveRole(ctx, s.opts.Pool, userID)
	s.logUnexpected(ctx, "read the caller's account", err)
	return role, err
}

// checkSession is accounts.CheckSession, logging an unexpected error once.
func (s *Server) checkSession(ctx context.Context, session accounts.Session, project string) (accounts.Access, error) {
	a, err := accounts.CheckSession(ctx, s.opts.Pool, session, project)
	if !errors.Is(err, accounts.ErrProjectNotFound) {
		s.logUnexpected(ctx, "read the caller's account", err)
	}
	return a, err
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
