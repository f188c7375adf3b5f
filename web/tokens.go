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
)

const tokenTTL = 24 * time.Hour

// Principal is the authenticated caller of a request.
type Principal struct {
	UserID string
	Role   string
}

// IsAdmin reports whether the caller has the admin role.
func (p Principal) IsAdmin() bool { return p.Role == roleAdmin }

type claims struct {
	Role string `json:"role"`
	jwt.RegisteredClaims
}

// tokens issues and verifies HS256 access tokens: sub is the user id, role
// the user's role; they last 24 h and every replica accepts them (one secret).
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
	case c.Subject == "" || (c.Role != roleUser && c.Role != roleAdmin):
		return Principal{}, errors.New("the access token is invalid")
	}
	return Principal{UserID: c.Subject, Role: c.Role}, nil
}

type principalKey struct{}

// authenticate is Huma middleware: operations that declare the bearer
// security requirement need a valid token; the principal goes in the context.
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
	p, err := s.tokens.verify(raw)
	if err != nil {
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="switchboard", error="invalid_token"`)
		_ = huma.WriteErr(s.api, ctx, http.StatusUnauthorized, err.Error())
		return
	}
	next(huma.WithValue(ctx, principalKey{}, p))
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
