package web

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/accounts"
)

// The routes that end sessions and change a password. A user token is a
// session (accounts.Session): a logout ends that one token, a password
// change or "sign out everywhere" ends every session of the account. The
// per-request account read (checkAccount) refuses an ended one from its
// next request on every replica.

type passwordChangeInput struct {
	Body struct {
		CurrentPassword string `json:"current_password" maxLength:"1024" doc:"the password the account has now"`
		NewPassword     string `json:"new_password" minLength:"8" maxLength:"72" doc:"at least 8 characters, at most 72 bytes (bcrypt's limit)"`
	}
}

// needsUserToken refuses what only a person may do with an API key.
const needsUserToken = "this needs a user token, not an API key: log in (POST /v1/auth/login) and use that token"

func registerSessions(api huma.API, s *Server) {
	tags := []string{"Auth"}
	huma.Register(api, huma.Operation{
		OperationID: "auth-logout", Method: http.MethodPost, Path: "/v1/auth/logout",
		Summary: "Sign this token out", Tags: tags, Security: bearer, DefaultStatus: http.StatusNoContent,
		Description: "The bearer token is refused on every replica from its next request. Other tokens of the account stay valid (POST /v1/me/sessions/revoke ends them all). API keys are revoked with DELETE /v1/api-keys/{id} instead (403 here).",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden},
	}, s.logout)
	huma.Register(api, huma.Operation{
		OperationID: "me-sessions-revoke", Method: http.MethodPost, Path: "/v1/me/sessions/revoke",
		Summary: "Sign out everywhere", Tags: tags, Security: bearer, DefaultStatus: http.StatusNoContent,
		Description: "Every token and console session of the account, this one included, is refused on every replica from its next request, and the account's WebSockets are closed. API keys are not affected. Needs a user token (403 with an API key).",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden},
	}, s.revokeSessions)
	huma.Register(api, huma.Operation{
		OperationID: "me-password-change", Method: http.MethodPost, Path: "/v1/me/password",
		Summary: "Change your password", Tags: tags, Security: bearer, MaxBodyBytes: maxAuthBody,
		Description: "Needs the current password (403 when wrong). Every other token and console session of the account is refused on every replica from its next request and the account's WebSockets are closed; " +
			"the answer holds a fresh token. Pending reset links stop working. API keys are not affected. Needs a user token (403 with an API key).",
		Errors: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusConflict, http.StatusUnprocessableEntity, http.StatusServiceUnavailable},
	}, s.changePassword)
}

func (s *Server) logout(ctx context.Context, _ *struct{}) (*struct{}, error) {
	p := principal(ctx)
	if p.KeyID != "" {
		return nil, huma.Error403Forbidden("an API key is not signed out: revoke it with DELETE /v1/api-keys/{id}")
	}
	if err := accounts.EndSession(ctx, s.opts.Pool, p.Session, p.TokenExpires); err != nil {
		return nil, s.fail(ctx, err, accounts.ErrAccountGone.Error(), "")
	}
	return nil, nil
}

func (s *Server) revokeSessions(ctx context.Context, _ *struct{}) (*struct{}, error) {
	p := principal(ctx)
	if p.KeyID != "" {
		return nil, huma.Error403Forbidden(needsUserToken)
	}
	if _, err := accounts.EndSessions(ctx, s.opts.Pool, p.UserID); err != nil {
		return nil, s.fail(ctx, err, accounts.ErrAccountGone.Error(), "")
	}
	s.closeSockets(ctx, p.UserID, "sessions ended")
	return nil, nil
}

func (s *Server) changePassword(ctx context.Context, in *passwordChangeInput) (*authOutput, error) {
	p := principal(ctx)
	if p.KeyID != "" {
		return nil, huma.Error403Forbidden(needsUserToken)
	}
	if err := accounts.CheckNewPassword(in.Body.NewPassword); err != nil {
		return nil, invalidField("body.new_password", err, nil)
	}
	u, err := s.passwords.ChangePassword(ctx, s.opts.Pool, p.UserID, in.Body.CurrentPassword, in.Body.NewPassword)
	if err != nil {
		return nil, s.fail(ctx, err, accounts.ErrAccountGone.Error(), accounts.ErrPasswordChanged.Error())
	}
	s.closeSockets(ctx, u.ID, "password changed")
	return s.authResponse(ctx, u)
}

// closeSockets closes the account's WebSockets on every node after its
// sessions ended; a socket outlives the token that opened it otherwise. A
// node that cannot be reached is logged: its sockets' next ticket is
// refused anyway.
func (s *Server) closeSockets(ctx context.Context, userID, why string) {
	if s.opts.Cluster == nil {
		return
	}
	if _, err := s.opts.Cluster.FanOut(context.WithoutCancel(ctx), ActionDisconnectUser, userID); err != nil {
		s.opts.Logger.WarnContext(ctx, why+": closing the account's sockets failed", "user_id", userID, "error", err)
	}
}

// registerPasswordMetrics exports the password hasher's load.
func (s *Server) registerPasswordMetrics() {
	s.opts.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_password_hashes_in_flight",
		Help: "bcrypt hashes and checks running on this replica now (at most SWITCHBOARD_PASSWORD_HASH_CONCURRENCY).",
	}, func() float64 { return float64(s.passwords.InFlight()) }))
}
