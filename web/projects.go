package web

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/jobs"
)

// The project routes: projects, their members and leaving one. Who may
// call which is declared in projectaccess.go; the {id} of these routes is
// the project they act in.

// Project is a project as its member sees it.
type Project struct {
	ID        string    `json:"id" format:"uuid"`
	Name      string    `json:"name"`
	Personal  bool      `json:"personal" doc:"the caller's personal project (cannot be deleted)"`
	Role      string    `json:"role" enum:"viewer,developer,admin,owner" doc:"the caller's role in the project (instance admins: owner)"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Member is a member of a project.
type Member struct {
	UserID  string    `json:"user_id" format:"uuid"`
	Email   string    `json:"email"`
	Role    string    `json:"role" enum:"viewer,developer,admin,owner"`
	AddedAt time.Time `json:"added_at"`
}

type projectNameBody struct {
	Name string `json:"name" minLength:"1" maxLength:"100" doc:"1 to 100 characters, no control characters"`
}

type projectCreateInput struct{ Body projectNameBody }

type projectIDInput struct{ IDPath }

type projectRenameInput struct {
	IDPath
	Body projectNameBody
}

type projectOutput struct{ Body Project }

type projectListOutput struct {
	Body struct {
		Items []Project `json:"items" nullable:"false" doc:"the personal project first, then oldest first"`
	}
}

type memberListInput struct {
	IDPath
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"50"`
	Cursor string `query:"cursor" maxLength:"200" doc:"next_cursor of the previous page"`
}

type memberListOutput struct {
	Body struct {
		Items      []Member `json:"items" nullable:"false" doc:"in the order they joined"`
		NextCursor *string  `json:"next_cursor" doc:"null on the last page"`
	}
}

type memberInput struct {
	IDPath
	UserID string `path:"user_id" format:"uuid"`
}

type memberRoleInput struct {
	IDPath
	UserID string `path:"user_id" format:"uuid"`
	Body   struct {
		Role string `json:"role" enum:"viewer,developer,admin,owner" doc:"granting, changing or taking owner needs the owner role"`
	}
}

type memberOutput struct{ Body Member }

func registerProjects(api huma.API, s *Server) {
	tags := []string{"Projects"}
	reg := func(op huma.Operation, h any) {
		op.Tags, op.Security = tags, bearer
		op.Errors = append([]int{http.StatusUnauthorized}, op.Errors...)
		switch f := h.(type) {
		case func(context.Context, *projectCreateInput) (*projectOutput, error):
			huma.Register(api, op, f)
		case func(context.Context, *struct{}) (*projectListOutput, error):
			huma.Register(api, op, f)
		case func(context.Context, *projectIDInput) (*projectOutput, error):
			huma.Register(api, op, f)
		case func(context.Context, *projectRenameInput) (*projectOutput, error):
			huma.Register(api, op, f)
		case func(context.Context, *projectIDInput) (*struct{}, error):
			huma.Register(api, op, f)
		case func(context.Context, *memberListInput) (*memberListOutput, error):
			huma.Register(api, op, f)
		case func(context.Context, *memberRoleInput) (*memberOutput, error):
			huma.Register(api, op, f)
		case func(context.Context, *memberInput) (*struct{}, error):
			huma.Register(api, op, f)
		}
	}
	reg(huma.Operation{OperationID: "project-create", Method: http.MethodPost, Path: "/v1/projects", DefaultStatus: http.StatusCreated,
		Summary: "Create a project", Description: "The caller becomes its owner. An account creates at most 100 projects.",
		Errors: []int{http.StatusConflict, http.StatusUnprocessableEntity}}, s.createProject)
	reg(huma.Operation{OperationID: "project-list", Method: http.MethodGet, Path: "/v1/projects",
		Summary: "List your projects", Description: "Every project the caller is a member of, with its role: the personal project first."}, s.listProjects)
	reg(huma.Operation{OperationID: "project-get", Method: http.MethodGet, Path: "/v1/projects/{id}",
		Summary: "Get a project", Description: "Members (viewer and up). Another project is a 404.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity}}, s.getProject)
	reg(huma.Operation{OperationID: "project-rename", Method: http.MethodPatch, Path: "/v1/projects/{id}",
		Summary: "Rename a project", Description: "Owners.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity}}, s.renameProject)
	reg(huma.Operation{OperationID: "project-delete", Method: http.MethodDelete, Path: "/v1/projects/{id}", DefaultStatus: http.StatusNoContent,
		Summary: "Delete a project", Description: "Owners. Deletes its tasks, runs, rooms, API keys, invites and its run-event stream; every member's sockets get project.removed (reason deleted). A personal project cannot be deleted (409).",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity}}, s.deleteProject)
	reg(huma.Operation{OperationID: "project-member-list", Method: http.MethodGet, Path: "/v1/projects/{id}/members",
		Summary: "List a project's members", Description: "Members (viewer and up), in the order they joined, a page at a time.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity}}, s.listMembers)
	reg(huma.Operation{OperationID: "project-member-update", Method: http.MethodPatch, Path: "/v1/projects/{id}/members/{user_id}",
		Summary: "Change a member's role", Description: "Admins; granting, changing or taking the owner role needs an owner. The last owner cannot be demoted (409).",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity}}, s.changeMember)
	reg(huma.Operation{OperationID: "project-member-remove", Method: http.MethodDelete, Path: "/v1/projects/{id}/members/{user_id}", DefaultStatus: http.StatusNoContent,
		Summary: "Remove a member", Description: "Admins (an owner only by an owner), or any member removing themselves (leaving). The last owner cannot be removed (409). Their requests in the project are refused and their sockets leave its stream (project.removed) at once on every replica.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity}}, s.removeMember)
	reg(huma.Operation{OperationID: "project-leave", Method: http.MethodPost, Path: "/v1/projects/{id}/leave", DefaultStatus: http.StatusNoContent,
		Summary: "Leave a project", Description: "Any member; the last owner cannot leave (409).",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity}}, s.leaveProject)
}

// checkProjectName refuses a name with control characters or only space.
func checkProjectName(name string) error {
	if strings.ContainsFunc(name, unicode.IsControl) || strings.TrimSpace(name) == "" {
		return huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{
			Message: "name may not be blank or contain control characters", Location: "body.name", Value: name})
	}
	return nil
}

func (s *Server) createProject(ctx context.Context, in *projectCreateInput) (*projectOutput, error) {
	if err := checkProjectName(in.Body.Name); err != nil {
		return nil, err
	}
	p, err := accounts.CreateProject(ctx, s.opts.Pool, principal(ctx).UserID, in.Body.Name)
	if err != nil {
		return nil, s.projectFail(ctx, err)
	}
	return &projectOutput{Body: projectOut(p)}, nil
}

func (s *Server) listProjects(ctx context.Context, _ *struct{}) (*projectListOutput, error) {
	ps, err := accounts.ListProjects(ctx, s.opts.Pool, principal(ctx).UserID)
	if err != nil {
		return nil, s.projectFail(ctx, err)
	}
	out := &projectListOutput{}
	out.Body.Items = make([]Project, 0, len(ps))
	for _, p := range ps {
		out.Body.Items = append(out.Body.Items, projectOut(p))
	}
	return out, nil
}

func (s *Server) getProject(ctx context.Context, in *projectIDInput) (*projectOutput, error) {
	c := principal(ctx)
	p, err := accounts.GetProject(ctx, s.opts.Pool, in.ID, c.UserID, c.ProjectRole)
	if err != nil {
		return nil, s.projectFail(ctx, err)
	}
	return &projectOutput{Body: projectOut(p)}, nil
}

func (s *Server) renameProject(ctx context.Context, in *projectRenameInput) (*projectOutput, error) {
	if err := checkProjectName(in.Body.Name); err != nil {
		return nil, err
	}
	c := principal(ctx)
	p, err := accounts.RenameProject(ctx, s.opts.Pool, in.ID, c.UserID, c.ProjectRole, in.Body.Name)
	if err != nil {
		return nil, s.projectFail(ctx, err)
	}
	return &projectOutput{Body: projectOut(p)}, nil
}

func (s *Server) deleteProject(ctx context.Context, in *projectIDInput) (*struct{}, error) {
	if err := accounts.DeleteProject(ctx, s.opts.Pool, in.ID); err != nil {
		return nil, s.projectFail(ctx, err)
	}
	s.tasksChanged()
	return nil, nil
}

func (s *Server) listMembers(ctx context.Context, in *memberListInput) (*memberListOutput, error) {
	var after accounts.Position
	if in.Cursor != "" {
		var err error
		if after.CreatedAt, after.ID, err = jobs.DecodeCursor(in.Cursor); err != nil {
			return nil, huma.Error422UnprocessableEntity(err.Error(), &huma.ErrorDetail{Location: "query.cursor", Message: err.Error()})
		}
	}
	ms, more, err := accounts.ListMembers(ctx, s.opts.Pool, in.ID, after, in.Limit)
	if err != nil {
		return nil, s.projectFail(ctx, err)
	}
	out := &memberListOutput{}
	out.Body.Items = make([]Member, 0, len(ms))
	for _, m := range ms {
		out.Body.Items = append(out.Body.Items, memberOut(m))
	}
	if more {
		last := ms[len(ms)-1]
		out.Body.NextCursor = nilIfEmpty(jobs.EncodeCursor(last.AddedAt, last.UserID))
	}
	return out, nil
}

func (s *Server) changeMember(ctx context.Context, in *memberRoleInput) (*memberOutput, error) {
	m, err := accounts.ChangeMember(ctx, s.opts.Pool, accounts.MemberChange{
		ProjectID: in.ID, UserID: in.UserID, ActorRole: principal(ctx).ProjectRole, Role: in.Body.Role})
	if err != nil {
		return nil, s.projectFail(ctx, err)
	}
	return &memberOutput{Body: memberOut(m)}, nil
}

func (s *Server) removeMember(ctx context.Context, in *memberInput) (*struct{}, error) {
	c := principal(ctx)
	if in.UserID != c.UserID && !accounts.RoleAtLeast(c.ProjectRole, accounts.ProjectAdmin) {
		return nil, huma.Error403Forbidden("removing another member needs the admin role in the project; the caller's is " + c.ProjectRole)
	}
	actor := c.ProjectRole
	if in.UserID == c.UserID {
		actor = accounts.ProjectOwner // leaving needs no one's leave
	}
	_, err := accounts.ChangeMember(ctx, s.opts.Pool, accounts.MemberChange{ProjectID: in.ID, UserID: in.UserID, ActorRole: actor})
	if err != nil {
		return nil, s.projectFail(ctx, err)
	}
	return nil, nil
}

func (s *Server) leaveProject(ctx context.Context, in *projectIDInput) (*struct{}, error) {
	return s.removeMember(ctx, &memberInput{IDPath: in.IDPath, UserID: principal(ctx).UserID})
}

// projectFail maps the errors of projects, members and invites.
func (s *Server) projectFail(ctx context.Context, err error) error {
	for _, known := range []error{accounts.ErrProjectNotFound, accounts.ErrMemberNotFound, accounts.ErrInviteNotFound} {
		if errors.Is(err, known) {
			return huma.Error404NotFound(strings.TrimPrefix(known.Error(), db.ErrNotFound.Error()+": "))
		}
	}
	for _, known := range []error{accounts.ErrPersonalProject, accounts.ErrLastOwner, accounts.ErrTooManyProjects,
		accounts.ErrAlreadyMember, accounts.ErrInvitePending, accounts.ErrTooManyInvites} {
		if errors.Is(err, known) {
			return huma.Error409Conflict(strings.TrimPrefix(known.Error(), db.ErrConflict.Error()+": "))
		}
	}
	if errors.Is(err, accounts.ErrInvalidProjectRole) {
		return huma.Error422UnprocessableEntity(err.Error())
	}
	return s.fail(ctx, err, "", "")
}

func projectOut(p accounts.Project) Project {
	return Project{ID: p.ID, Name: p.Name, Personal: p.Personal, Role: p.Role, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

func memberOut(m accounts.Member) Member {
	return Member{UserID: m.UserID, Email: m.Email, Role: m.Role, AddedAt: m.AddedAt}
}
