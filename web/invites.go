package web

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/accounts"
)

// The invite routes: an admin of a project invites an address with a role
// (accounts.CreateInvite); the person accepts with the token, signed in
// with the invited address.

// Invite is a pending invite.
type Invite struct {
	ID        string    `json:"id" format:"uuid"`
	Email     string    `json:"email"`
	Role      string    `json:"role" enum:"viewer,developer,admin,owner"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at" doc:"7 days after it was made"`
}

type inviteCreated struct {
	Invite
	Token string `json:"token" doc:"sbi_… shown only in this answer; the invited person accepts it (POST /v1/invites/accept) or registers with it"`
}

type inviteCreateInput struct {
	IDPath
	Body struct {
		Email string `json:"email" format:"email" maxLength:"254" doc:"the address invited, compared in its normal form"`
		Role  string `json:"role" enum:"viewer,developer,admin,owner" doc:"owner only by an owner"`
	}
}

type inviteCreateOutput struct{ Body inviteCreated }

type inviteListOutput struct {
	Body struct {
		Items []Invite `json:"items" nullable:"false" doc:"pending invites, newest first (at most 100)"`
	}
}

type inviteRevokeInput struct {
	IDPath
	InviteID string `path:"invite_id" format:"uuid"`
}

type inviteAcceptInput struct {
	Body struct {
		Token string `json:"token" minLength:"1" maxLength:"200" doc:"the sbi_ token of the invite"`
	}
}

type inviteAcceptOutput struct {
	Body struct {
		Project Project `json:"project"`
		Role    string  `json:"role" enum:"viewer,developer,admin,owner"`
	}
}

func registerInvites(api huma.API, s *Server) {
	tags := []string{"Projects"}
	huma.Register(api, huma.Operation{
		OperationID: "project-invite-create", Method: http.MethodPost, Path: "/v1/projects/{id}/invites",
		Summary: "Invite an address to a project", Tags: tags, Security: bearer, DefaultStatus: http.StatusCreated,
		Description: "Admins. A single-use token valid 7 days, shown once (only its SHA-256 is stored). 409 for an address that is a member already or has a pending invite.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
	}, s.createInvite)
	huma.Register(api, huma.Operation{
		OperationID: "project-invite-list", Method: http.MethodGet, Path: "/v1/projects/{id}/invites",
		Summary: "List a project's pending invites", Tags: tags, Security: bearer,
		Description: "Admins. Never the tokens.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.listInvites)
	huma.Register(api, huma.Operation{
		OperationID: "project-invite-revoke", Method: http.MethodDelete, Path: "/v1/projects/{id}/invites/{invite_id}",
		Summary: "Revoke a pending invite", Tags: tags, Security: bearer, DefaultStatus: http.StatusNoContent,
		Description: "Admins. The token is refused from then on.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.revokeInvite)
	huma.Register(api, huma.Operation{
		OperationID: "invite-accept", Method: http.MethodPost, Path: "/v1/invites/accept",
		Summary: "Accept an invite", Tags: tags, Security: bearer,
		Description: "Signed in (a user token) with the invited address (403 otherwise, and the invite stays unused); an unknown, used, revoked or expired token is one 404. The account becomes a member with the invite's role (a member already keeps its role). Sockets opened from then on follow the project's stream.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.acceptInvite)
}

func (s *Server) createInvite(ctx context.Context, in *inviteCreateInput) (*inviteCreateOutput, error) {
	email, err := accounts.NormalizeEmail(in.Body.Email)
	if err != nil {
		return nil, invalidField("body.email", err, in.Body.Email)
	}
	c := principal(ctx)
	inv, token, err := accounts.CreateInvite(ctx, s.opts.Pool, accounts.NewInvite{
		ProjectID: in.ID, InvitedBy: c.UserID, Email: email, Role: in.Body.Role, ActorRole: c.ProjectRole})
	if err != nil {
		return nil, s.projectFail(ctx, err)
	}
	return &inviteCreateOutput{Body: inviteCreated{Invite: inviteOut(inv), Token: token}}, nil
}

func (s *Server) listInvites(ctx context.Context, in *projectIDInput) (*inviteListOutput, error) {
	invs, err := accounts.ListInvites(ctx, s.opts.Pool, in.ID)
	if err != nil {
		return nil, s.projectFail(ctx, err)
	}
	out := &inviteListOutput{}
	out.Body.Items = make([]Invite, 0, len(invs))
	for _, i := range invs {
		out.Body.Items = append(out.Body.Items, inviteOut(i))
	}
	return out, nil
}

func (s *Server) revokeInvite(ctx context.Context, in *inviteRevokeInput) (*struct{}, error) {
	if err := accounts.RevokeInvite(ctx, s.opts.Pool, in.ID, in.InviteID); err != nil {
		return nil, s.projectFail(ctx, err)
	}
	return nil, nil
}

func (s *Server) acceptInvite(ctx context.Context, in *inviteAcceptInput) (*inviteAcceptOutput, error) {
	c := principal(ctx)
	if c.KeyID != "" {
		return nil, huma.Error403Forbidden("an API key cannot accept invites: sign in and use that token")
	}
	u, err := accounts.UserByID(ctx, s.opts.Pool, c.UserID)
	if err != nil {
		return nil, s.fail(ctx, err, accounts.ErrAccountGone.Error(), "")
	}
	p, err := accounts.AcceptInvite(ctx, s.opts.Pool, in.Body.Token, u.ID, u.Email)
	if err != nil {
		return nil, s.projectFail(ctx, err)
	}
	out := &inviteAcceptOutput{}
	out.Body.Project, out.Body.Role = projectOut(p), p.Role
	return out, nil
}

func inviteOut(i accounts.Invite) Invite {
	return Invite{ID: i.ID, Email: i.Email, Role: i.Role, CreatedAt: i.CreatedAt, ExpiresAt: i.ExpiresAt}
}
