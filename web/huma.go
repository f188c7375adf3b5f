package web

import (
	"context"
	"errors"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/realtime"
	"github.com/switchboard/switchboard/realtime/stream"
)

func reflectType[T any]() reflect.Type { return reflect.TypeFor[T]() }

// fail maps a data-layer error to an HTTP problem: db.ErrNotFound to 404 and
// db.ErrConflict to 409 with the given details. Anything else is logged once
// here and answered 500 without its cause.
func (s *Server) fail(ctx context.Context, err error, notFound, conflict string) error {
	switch {
	case errors.Is(err, db.ErrNotFound):
		return huma.Error404NotFound(notFound)
	case errors.Is(err, db.ErrConflict):
		return huma.Error409Conflict(conflict)
	case errors.Is(err, realtime.ErrInvalidUTF8), errors.Is(err, stream.ErrInvalid):
		return huma.Error422UnprocessableEntity(err.Error())
	case errors.Is(err, context.Canceled):
		return huma.NewError(499, "client closed request")
	}
	s.opts.Logger.ErrorContext(ctx, "request failed", "error", err)
	return huma.Error500InternalServerError("internal error")
}
