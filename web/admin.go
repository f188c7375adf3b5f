package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/jobs"
)

// Operator routes on accounts: find them, grant and revoke the admin role,
// disable and enable them. requireAdmin lets only admins reach them, and
// every request reads the caller's role from the database, so a change made
// on one replica counts on every replica from the next request.

type adminUsersInput struct {
	Email  string `query:"email" maxLength:"254" doc:"only the account with this address (normalised like login does)"`
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"50"`
	Cursor string `query:"cursor" maxLength:"200" doc:"next_cursor of the previous page"`
}

type adminUsersOutput struct {
	Body struct {
		Items      []User  `json:"items" nullable:"false"`
		NextCursor *string `json:"next_cursor" doc:"pass as cursor for the next page; null on the last"`
	}
}

type adminUserInput struct {
	IDPath
}

type adminUserOutput struct {
	Body User
}

type adminPatchInput struct {
	IDPath
	Body struct {
		Role     *string `json:"role,omitempty" enum:"admin,user" doc:"admin grants the operator routes and the River UI; user revokes them"`
		Disabled *bool   `json:"disabled,omitempty" doc:"true refuses the account's logins and tokens everywhere and closes its sockets; false enables it again"`
	}
}

func registerAdmin(api huma.API, s *Server) {
	huma.Register(api, huma.Operation{
		OperationID: "admin-list-users", Method: http.MethodGet, Path: "/v1/admin/users",
		Summary: "List accounts, oldest first, or find one by email", Tags: []string{"Admin"},
		Description: "Pages through every account with a cursor; with email, the one account of that address (or none).",
		Security:    bearer, Errors: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusUnprocessableEntity},
	}, s.adminListUsers)
	huma.Register(api, huma.Operation{
		OperationID: "admin-get-user", Method: http.MethodGet, Path: "/v1/admin/users/{id}",
		Summary: "One account", Tags: []string{"Admin"},
		Description: "The account with this id, with its role and whether it is disabled.",
		Security:    bearer, Errors: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.adminGetUser)
	huma.Register(api, huma.Operation{
		OperationID: "admin-update-user", Method: http.MethodPatch, Path: "/v1/admin/users/{id}",
		Summary: "Grant or revoke the admin role, disable or enable an account",
		Description: "Takes effect on every replica from the next request. Disabling also closes the account's sockets on every node. An admin cannot disable their own account (409). " +
			"Needs a signed-in admin's token: an API key, even with the admin scope, is refused (403).",
		Tags: []string{"Admin"}, Security: bearer,
		Errors: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
	}, s.adminUpdateUser)
}

func (s *Server) adminListUsers(ctx context.Context, in *adminUsersInput) (*adminUsersOutput, error) {
	if in.Email != "" {
		return s.adminFindUser(ctx, in.Email)
	}
	var after accounts.Position
	if in.Cursor != "" {
		var err error
		if after.CreatedAt, after.ID, err = jobs.DecodeCursor(in.Cursor); err != nil {
			return nil, huma.Error422UnprocessableEntity(err.Error(), &huma.ErrorDetail{Location: "query.cursor", Message: err.Error()})
		}
	}
	users, more, err := accounts.ListUsers(ctx, s.opts.Pool, after, in.Limit)
	if err != nil {
		return nil, s.fail(ctx, err, "", "")
	}
	out := &adminUsersOutput{}
	out.Body.Items = make([]User, 0, len(users))
	for _, u := range users {
		out.Body.Items = append(out.Body.Items, userOut(u))
	}
	if more {
		last := users[len(users)-1]
		next := jobs.EncodeCursor(last.CreatedAt, last.ID)
		out.Body.NextCursor = &next
	}
	return out, nil
}

// adminFindUser answers the listing of the one account with that address,
// or of none.
func (s *Server) adminFindUser(ctx context.Context, email string) (*adminUsersOutput, error) {
	out := &adminUsersOutput{}
	out.Body.Items = []User{}
	u, err := accounts.UserByEmail(ctx, s.opts.Pool, email)
	switch {
	case err == nil:
		out.Body.Items = append(out.Body.Items, userOut(u))
	case !errors.Is(err, accounts.ErrUserNotFound):
		return nil, s.fail(ctx, err, "", "")
	}
	return out, nil
}

func (s *Server) adminGetUser(ctx context.Context, in *adminUserInput) (*adminUserOutput, error) {
	u, err := accounts.UserByID(ctx, s.opts.Pool, in.ID)
	if err != nil {
		return nil, s.fail(ctx, err, "no account has id "+in.ID, "")
	}
	return &adminUserOutput{Body: userOut(u)}, nil
}

// requirePerson refuses an API key on the routes that change who holds an
// account or its powers (a role, disabling, a password reset link): a
// leaked key can use the operator routes until it is revoked, but cannot
// leave an admin or a taken-over account behind.
func requirePerson(ctx context.Context, what string) error {
	if principal(ctx).KeyID != "" {
		return huma.Error403Forbidden(what + " needs a signed-in admin, not an API key: sign in (POST /v1/auth/login) and use that token")
	}
	return nil
}

func (s *Server) adminUpdateUser(ctx context.Context, in *adminPatchInput) (*adminUserOutput, error) {
	if err := requirePerson(ctx, "changing an account's role or disabling it"); err != nil {
		return nil, err
	}
	c := accounts.UserChange{Role: in.Body.Role, Disabled: in.Body.Disabled}
	if c.Disabled != nil && *c.Disabled && in.ID == principal(ctx).UserID {
		return nil, huma.Error409Conflict("you cannot disable your own account")
	}
	u, err := accounts.UpdateUser(ctx, s.opts.Pool, in.ID, c)
	if err != nil {
		return nil, s.fail(ctx, err, "no account has id "+in.ID, "")
	}
	if u.Disabled && c.Disabled != nil && s.opts.Cluster != nil {
		// Its tokens and tickets are refused from now on; its open sockets
		// are closed here.
		if _, err := s.opts.Cluster.FanOut(context.WithoutCancel(ctx), ActionDisconnectUser, u.ID); err != nil {
			s.opts.Logger.WarnContext(ctx, "disabled account: closing its sockets failed", "user_id", u.ID, "error", err)
		}
	}
	return &adminUserOutput{Body: userOut(u)}, nil
}
