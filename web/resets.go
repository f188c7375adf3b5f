package web

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/accounts"
)

// Password resets: a single-use link valid an hour
// (accounts.NewPasswordReset), made by an admin for an account, or mailed
// to an address that asks for it (POST /v1/auth/forgot); POST
// /v1/auth/reset with its token sets the password and ends every session
// of the account.

type registrationOutput struct {
	Body struct {
		Registration string `json:"registration" enum:"open,invite,closed" doc:"open: anyone may register; invite: only with an invite token; closed: an operator creates accounts"`
	}
}

type forgotInput struct {
	Body struct {
		Email string `json:"email" maxLength:"254" doc:"the account's address"`
	}
}

type forgotOutput struct {
	Body struct {
		Message string `json:"message"`
	}
}

// forgotAnswer is the one answer of POST /v1/auth/forgot, whatever the
// address.
const forgotAnswer = "if an account has this address, a reset link valid for one hour is on its way to it"

type resetInput struct {
	Body struct {
		Token    string `json:"token" maxLength:"200" doc:"the token of the reset link (sbr_…)"`
		Password string `json:"password" minLength:"8" maxLength:"72" doc:"the new password: at least 8 characters, at most 72 bytes"`
	}
}

type resetLink struct {
	URL       string    `json:"url" doc:"the link to hand to the account's owner: the console's reset page with the token"`
	Token     string    `json:"token" doc:"the token alone (sbr_…), for POST /v1/auth/reset"`
	ExpiresAt time.Time `json:"expires_at"`
}

type resetLinkOutput struct {
	Body resetLink
}

func registerResets(api huma.API, s *Server) {
	tags := []string{"Auth"}
	huma.Register(api, huma.Operation{
		OperationID: "auth-registration", Method: http.MethodGet, Path: "/v1/auth/registration",
		Summary: "Who may register here", Tags: tags, Security: public,
		Description: "The server's registration policy (SWITCHBOARD_REGISTRATION), for a sign-in page: open, invite or closed.",
		Errors:      []int{http.StatusTooManyRequests},
	}, s.registration)
	huma.Register(api, huma.Operation{
		OperationID: "auth-forgot", Method: http.MethodPost, Path: "/v1/auth/forgot",
		Summary: "Mail a password reset link", Tags: tags, Security: public, DefaultStatus: http.StatusAccepted,
		Description: "Always 202 with the same body, in the same time, whether or not an account has the address: the lookup and the mail happen after the answer. " +
			"An enabled account gets a single-use link valid one hour, at most 3 an hour per address; nothing is sent when the server has no SWITCHBOARD_SMTP_URL.",
		Errors: []int{http.StatusUnprocessableEntity, http.StatusTooManyRequests},
	}, s.forgot)
	huma.Register(api, huma.Operation{
		OperationID: "auth-reset", Method: http.MethodPost, Path: "/v1/auth/reset",
		Summary: "Set a new password with a reset link", Tags: tags, Security: public, DefaultStatus: http.StatusNoContent,
		Description: "Uses the link up, sets the password and ends every session of the account on every replica. 400 for a link that is unknown, used or expired; nothing changes then.",
		Errors:      []int{http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusTooManyRequests, http.StatusServiceUnavailable},
	}, s.resetPassword)
	huma.Register(api, huma.Operation{
		OperationID: "admin-password-reset", Method: http.MethodPost, Path: "/v1/admin/users/{id}/password-reset",
		Summary: "Make a password reset link for an account", Tags: []string{"Admin"}, Security: bearer,
		Description: "A single-use link valid one hour, to hand to the account's owner; the account's password and sessions change only when it is used. Needs a signed-in admin's token: an API key is refused (403).",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.adminPasswordReset)
}

func (s *Server) registration(context.Context, *struct{}) (*registrationOutput, error) {
	out := &registrationOutput{}
	out.Body.Registration = string(s.registrar.Policy)
	return out, nil
}

func (s *Server) forgot(ctx context.Context, in *forgotInput) (*forgotOutput, error) {
	email, err := accounts.NormalizeEmail(in.Body.Email)
	if err != nil {
		return nil, invalidField("body.email", err, in.Body.Email)
	}
	s.resetMail.enqueue(ctx, email)
	out := &forgotOutput{}
	out.Body.Message = forgotAnswer
	return out, nil
}

func (s *Server) resetPassword(ctx context.Context, in *resetInput) (*struct{}, error) {
	u, err := s.passwords.ResetPassword(ctx, s.opts.Pool, in.Body.Token, in.Body.Password)
	if err != nil {
		if err := accounts.CheckNewPassword(in.Body.Password); err != nil {
			return nil, invalidField("body.password", err, nil)
		}
		return nil, s.fail(ctx, err, "", "")
	}
	s.closeSockets(ctx, u.ID, "password reset")
	return nil, nil
}

func (s *Server) adminPasswordReset(ctx context.Context, in *adminUserInput) (*resetLinkOutput, error) {
	if err := requirePerson(ctx, "a password reset link for an account"); err != nil { // admin.go
		return nil, err
	}
	token, expires, err := accounts.NewPasswordReset(ctx, s.opts.Pool, in.ID)
	if err != nil {
		return nil, s.fail(ctx, err, "no account has id "+in.ID, "")
	}
	return &resetLinkOutput{Body: resetLink{URL: accounts.ResetURL(s.opts.PublicURL, token), Token: token, ExpiresAt: expires}}, nil
}
