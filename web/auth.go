package web

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/accounts"
)

// loginCredentials has no password rules: a wrong password of any length is
// a 401, as docs/api.md says, not a validation error.
type loginCredentials struct {
	Email    string `json:"email" maxLength:"254" doc:"account email, compared in the same normal form as at register"`
	Password string `json:"password" maxLength:"1024"`
}

type authBody struct {
	Token     string    `json:"token" doc:"bearer token for Authorization headers"`
	ExpiresAt time.Time `json:"expires_at"`
	User      User      `json:"user"`
}

type registerInput struct {
	Body struct {
		Email    string `json:"email" format:"email" maxLength:"254" doc:"account email: ASCII only (an internationalised domain in its xn-- form), case-insensitive, stored lower-cased"`
		Password string `json:"password" minLength:"8" maxLength:"72" doc:"at least 8 characters, at most 72 bytes (bcrypt's limit)"`
		Invite   string `json:"invite,omitempty" maxLength:"200" doc:"the invite token you were given; needed when the server's registration is invite (GET /v1/auth/registration)"`
	}
}

type authOutput struct {
	// SetCookie carries an admin's session for the River UI (login only).
	SetCookie string `header:"Set-Cookie" doc:"admins: River UI session cookie, HttpOnly, SameSite=Strict"`
	Body      authBody
}

type loginInput struct {
	Body   loginCredentials
	secure bool
}

// Resolve notes whether the client reached us over HTTPS, for the cookie.
func (in *loginInput) Resolve(ctx huma.Context) []error {
	in.secure = ctx.TLS() != nil || strings.EqualFold(ctx.Header("X-Forwarded-Proto"), "https")
	return nil
}

type meOutput struct {
	Body User
}

func registerAuth(api huma.API, s *Server) {
	huma.Register(api, huma.Operation{
		OperationID: "auth-register", Method: http.MethodPost, Path: "/v1/auth/register",
		Summary: "Create an account and get a token", Tags: []string{"Auth"}, Security: public,
		Description: "Creates an account with a unique email (409 when taken) and a password of 8 to 72 bytes, and answers a 24 h bearer token for it. " +
			"The server's registration policy (GET /v1/auth/registration) decides who may: open, invite (an invite token for that address) or closed (403).",
		DefaultStatus: http.StatusCreated,
		Errors:        []int{http.StatusForbidden, http.StatusConflict, http.StatusUnprocessableEntity, http.StatusTooManyRequests, http.StatusServiceUnavailable},
	}, s.register)
	huma.Register(api, huma.Operation{
		OperationID: "auth-login", Method: http.MethodPost, Path: "/v1/auth/login",
		Summary: "Exchange email and password for a token", Tags: []string{"Auth"}, Security: public,
		Description: "A 24 h bearer token for the account; a wrong email or password is a 401 that does not say which. Admins also get the River UI session cookie.",
		Errors:      []int{http.StatusUnauthorized, http.StatusUnprocessableEntity, http.StatusTooManyRequests, http.StatusServiceUnavailable},
	}, s.login)
	huma.Register(api, huma.Operation{
		OperationID: "me", Method: http.MethodGet, Path: "/v1/me",
		Summary: "The authenticated user", Tags: []string{"Auth"},
		Description: "The account the bearer token or API key acts for.",
		Security:    bearer, Errors: []int{http.StatusUnauthorized},
	}, s.me)
}

func (s *Server) register(ctx context.Context, in *registerInput) (*authOutput, error) {
	b := in.Body
	// The policy first: a closed server spends no hashing on a request it
	// refuses, and tells nothing about the address.
	if err := s.registrar.Allowed(b.Invite != ""); err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	email, err := accounts.NormalizeEmail(b.Email)
	if err != nil {
		return nil, invalidField("body.email", err, b.Email)
	}
	if err := accounts.CheckNewPassword(b.Password); err != nil {
		return nil, invalidField("body.password", err, nil)
	}
	hash, err := s.passwords.Hash(ctx, b.Password)
	if err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	u, err := s.registrar.Register(ctx, s.opts.Pool, accounts.NewAccount{Email: email, PasswordHash: hash, Invite: b.Invite})
	if err != nil {
		return nil, s.fail(ctx, err, "", "an account with this email already exists; log in instead")
	}
	return s.authResponse(ctx, u)
}

// invalidField is a 422 naming the field and what is wrong with it.
func invalidField(location string, err error, value any) error {
	return huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{Message: err.Error(), Location: location, Value: value})
}

func (s *Server) login(ctx context.Context, in *loginInput) (*authOutput, error) {
	u, err := s.checkPassword(ctx, in.Body.Email, in.Body.Password)
	if err != nil {
		return nil, err
	}
	out, err := s.authResponse(ctx, u)
	if err == nil && u.Role == accounts.RoleAdmin {
		out.SetCookie = sessionCookieFor(out.Body.Token, out.Body.ExpiresAt, in.secure)
	}
	return out, err
}

// checkPassword is accounts.Passwords.Authenticate with its errors as
// problems: a refusal is a 401 that says why, a busy hasher a 503.
func (s *Server) checkPassword(ctx context.Context, email, password string) (accounts.User, error) {
	u, err := s.passwords.Authenticate(ctx, s.opts.Pool, email, password)
	if err != nil {
		return accounts.User{}, s.fail(ctx, err, "", "")
	}
	return u, nil
}

func (s *Server) authResponse(ctx context.Context, u accounts.User) (*authOutput, error) {
	tok, exp, err := s.tokens.issue(u.ID, u.Role, u.TokenGeneration, time.Now())
	if err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	return &authOutput{Body: authBody{Token: tok, ExpiresAt: exp, User: userOut(u)}}, nil
}

func (s *Server) me(ctx context.Context, _ *struct{}) (*meOutput, error) {
	u, err := accounts.UserByID(ctx, s.opts.Pool, principal(ctx).UserID)
	if err != nil {
		return nil, s.fail(ctx, err, accounts.ErrAccountGone.Error(), "")
	}
	return &meOutput{Body: userOut(u)}, nil
}
