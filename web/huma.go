package web

import (
	"context"
	"errors"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/realtime"
	"github.com/switchboard/switchboard/realtime/stream"
)

func reflectType[T any]() reflect.Type { return reflect.TypeFor[T]() }

// fail maps a data-layer error to an HTTP problem: db.ErrNotFound to 404,
// db.ErrConflict to 409 with the given details, db.ErrInvalidText to 422,
// a quota.ExceededError to its QuotaProblem (409 or 429),
// an accounts.RefusedError to 401 and an accounts.ForbiddenError to 403
// with its reason, a busy password hasher to 503 with Retry-After.
// Anything else is logged once here and answered 500 without its cause.
func (s *Server) fail(ctx context.Context, err error, notFound, conflict string) error {
	var refused *accounts.RefusedError
	var forbidden *accounts.ForbiddenError
	var exceeded *quota.ExceededError
	switch {
	case errors.As(err, &exceeded):
		return quotaError(exceeded)
	case errors.As(err, &refused):
		return huma.Error401Unauthorized(refused.Error())
	case errors.As(err, &forbidden):
		return huma.Error403Forbidden(forbidden.Error())
	case errors.Is(err, accounts.ErrHashingBusy):
		return huma.ErrorWithHeaders(huma.Error503ServiceUnavailable(accounts.ErrHashingBusy.Error()), http.Header{"Retry-After": {"1"}})
	case errors.Is(err, accounts.ErrResetLinkInvalid):
		return huma.Error400BadRequest(accounts.ErrResetLinkInvalid.Error())
	case errors.Is(err, db.ErrNotFound):
		return huma.Error404NotFound(notFound)
	case errors.Is(err, db.ErrConflict):
		return huma.Error409Conflict(conflict)
	case errors.Is(err, db.ErrInvalidText):
		return huma.Error422UnprocessableEntity("a value of this request cannot be stored: text may not hold NUL characters or lone UTF-16 surrogates")
	case errors.Is(err, realtime.ErrInvalidUTF8), errors.Is(err, stream.ErrInvalid):
		return huma.Error422UnprocessableEntity(err.Error())
	case errors.Is(err, context.Canceled):
		return huma.NewError(499, "client closed request")
	case databaseUnavailable(err): // unavailable.go
		s.opts.Logger.WarnContext(ctx, "request failed: the database is unavailable", "error", err)
		return unavailableError()
	}
	s.opts.Logger.ErrorContext(ctx, "request failed", "error", err)
	return huma.Error500InternalServerError("internal error")
}
