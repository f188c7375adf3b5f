package web

import (
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/switchboard/switchboard/accounts"
)

// The caller's project. A request acts in one project: an API key's own,
// or for a user token the project named by ProjectHeader (on
// /v1/projects/{id}/… routes, the path's), else the account's personal
// project. checkAccount resolves it and the caller's role there in the
// account read every request makes; requireProjectRole then refuses a
// caller below the least role the route needs (projectRoute). A project
// the caller is not a member of is a 404, never a 403, so ids cannot be
// probed; instance admins act as owners of every project.

// ProjectHeader names the project a user token's request acts in.
const ProjectHeader = "X-Switchboard-Project"

const projectNotFound = "project not found"

// requestedProject is the project a request names: the {id} of a
// /v1/projects/{id} route, else ProjectHeader; "" for none. bad is why a
// named one is malformed.
func requestedProject(ctx huma.Context) (project, bad string) {
	if strings.HasPrefix(ctx.Operation().Path, "/v1/projects/{id}") {
		// A malformed id is Huma's 422 (IDPath), after the account read.
		if id, err := uuid.Parse(ctx.Param("id")); err == nil {
			return id.String(), ""
		}
		return "", ""
	} else if _, scoped := projectRoute(ctx.Operation()); scoped {
		project = strings.TrimSpace(ctx.Header(ProjectHeader))
	}
	if project == "" {
		return "", ""
	}
	id, err := uuid.Parse(project)
	if err != nil {
		return "", ProjectHeader + " must be a project id (a UUID)"
	}
	return id.String(), ""
}

// projectRoles are the routes that need more than the default role of
// their method (viewer to read, developer to change).
var projectRoles = map[string]string{
	"PATCH /v1/projects/{id}":                      accounts.ProjectOwner,
	"DELETE /v1/projects/{id}":                     accounts.ProjectOwner,
	"POST /v1/projects/{id}/leave":                 accounts.ProjectViewer,
	"DELETE /v1/projects/{id}/members/{user_id}":   accounts.ProjectViewer, // yourself: leave; others need admin (the handler)
	"PATCH /v1/projects/{id}/members/{user_id}":    accounts.ProjectAdmin,
	"POST /v1/projects/{id}/invites":               accounts.ProjectAdmin,
	"GET /v1/projects/{id}/invites":                accounts.ProjectAdmin,
	"DELETE /v1/projects/{id}/invites/{invite_id}": accounts.ProjectAdmin,
	"POST /v1/api-keys":                            accounts.ProjectAdmin,
	"GET /v1/api-keys":                             accounts.ProjectAdmin,
	"DELETE /v1/api-keys/{id}":                     accounts.ProjectAdmin,
}

// projectScoped are the path prefixes of the routes that act in the
// caller's project.
var projectScoped = []string{"/v1/tasks", "/v1/runs", "/v1/api-keys", "/v1/rooms", "/v1/projects/{id}"}

// projectRoute is the least project role op needs, and whether it acts
// in a project at all.
func projectRoute(op *huma.Operation) (string, bool) {
	scoped := false
	for _, prefix := range projectScoped {
		scoped = scoped || op.Path == prefix || strings.HasPrefix(op.Path, prefix+"/")
	}
	if !scoped {
		return "", false
	}
	if role, ok := projectRoles[op.Method+" "+op.Path]; ok {
		return role, true
	}
	if op.Method == http.MethodGet || op.Method == http.MethodHead {
		return accounts.ProjectViewer, true
	}
	return accounts.ProjectDeveloper, true
}

// requireProjectRole is Huma middleware after checkScopes: a project-scoped
// route answers 403 to a caller below the role it needs, naming the role,
// and to an API key asked to act in another project than its own.
func (s *Server) requireProjectRole(ctx huma.Context, next func(huma.Context)) {
	need, scoped := projectRoute(ctx.Operation())
	p, ok := ctx.Context().Value(principalKey{}).(Principal)
	if !scoped || !ok {
		next(ctx)
		return
	}
	if project, _ := requestedProject(ctx); p.KeyID != "" && project != "" && project != p.ProjectID {
		_ = huma.WriteErr(s.api, ctx, http.StatusForbidden, "this API key acts only in its own project, "+p.ProjectID)
		return
	}
	if !accounts.RoleAtLeast(p.ProjectRole, need) {
		_ = huma.WriteErr(s.api, ctx, http.StatusForbidden,
			"this needs the "+need+" role in the project; the caller's is "+p.ProjectRole)
		return
	}
	next(ctx)
}
