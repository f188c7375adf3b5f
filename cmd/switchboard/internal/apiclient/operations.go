package apiclient

import (
	"net/url"
	"strings"
)

// Operation is one route of the API as the OpenAPI document names it.
type Operation struct {
	ID     string // the document's operationId
	Method string
	Path   string // with {id}-style parameters
}

// expand fills the path's parameters, in order, path-escaped.
func (o Operation) expand(args ...string) string {
	p := o.Path
	for _, a := range args {
		i := strings.IndexByte(p, '{')
		j := strings.IndexByte(p, '}')
		if i < 0 || j < i {
			break
		}
		p = p[:i] + url.PathEscape(a) + p[j+1:]
	}
	return p
}

// The routes the command line calls.
var (
	OpLogin        = Operation{"auth-login", "POST", "/v1/auth/login"}
	OpLogout       = Operation{"auth-logout", "POST", "/v1/auth/logout"}
	OpMe           = Operation{"me", "GET", "/v1/me"}
	OpTaskList     = Operation{"task-list", "GET", "/v1/tasks"}
	OpTaskCreate   = Operation{"task-create", "POST", "/v1/tasks"}
	OpTaskGet      = Operation{"task-get", "GET", "/v1/tasks/{id}"}
	OpTaskUpdate   = Operation{"task-update", "PATCH", "/v1/tasks/{id}"}
	OpTaskDelete   = Operation{"task-delete", "DELETE", "/v1/tasks/{id}"}
	OpTaskTrigger  = Operation{"task-run-create", "POST", "/v1/tasks/{id}/runs"}
	OpTaskRuns     = Operation{"task-run-list", "GET", "/v1/tasks/{id}/runs"}
	OpTaskBackfill = Operation{"task-backfill", "POST", "/v1/tasks/{id}/backfill"}
	OpTaskRotate   = Operation{"task-rotate-secret", "POST", "/v1/tasks/{id}/rotate-secret"}
	OpRunList      = Operation{"run-list", "GET", "/v1/runs"}
	OpRunGet       = Operation{"run-get", "GET", "/v1/runs/{id}"}
	OpRunAttempts  = Operation{"run-attempt-list", "GET", "/v1/runs/{id}/attempts"}
	OpRunCancel    = Operation{"run-cancel", "POST", "/v1/runs/{id}/cancel"}
	OpRunRetry     = Operation{"run-retry", "POST", "/v1/runs/{id}/retry"}
	OpKeyList      = Operation{"api-key-list", "GET", "/v1/api-keys"}
	OpKeyCreate    = Operation{"api-key-create", "POST", "/v1/api-keys"}
	OpKeyRevoke    = Operation{"api-key-revoke", "DELETE", "/v1/api-keys/{id}"}
	OpTicket       = Operation{"ws-ticket", "POST", "/v1/ws/ticket"}
	OpConnect      = Operation{"ws-connect", "GET", "/v1/ws"}
)
