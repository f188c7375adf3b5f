package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/infra/db"
)

// An unexpected error is answered here, in one place, whatever route it
// came from: 503 with Retry-After while the database cannot be reached
// (the client should try again; nothing is wrong with its request), else
// 500 naming the request id.

// outageRetryAfter is the Retry-After, in seconds, of an answer given
// while the database is unavailable.
const outageRetryAfter = "5"

// outageDetail is the detail of that answer.
const outageDetail = "the database is unavailable; try again shortly"

// databaseUnavailable reports whether err is the database out of reach:
// refused, lost or timed-out connections and a server not taking
// statements (db.Transient), or a deadline that passed while waiting for it
// or for a connection of the pool.
func databaseUnavailable(err error) bool {
	return db.Transient(err) || errors.Is(err, context.DeadlineExceeded)
}

// internalAnswer is the status, detail and headers of the answer to an
// unexpected error.
func internalAnswer(ctx context.Context, err error) (int, string, http.Header) {
	if databaseUnavailable(err) {
		return http.StatusServiceUnavailable, outageDetail, http.Header{"Retry-After": {outageRetryAfter}}
	}
	return http.StatusInternalServerError, "internal error; the request id is " + requestIDFrom(ctx), nil
}

// writeInternal answers an unexpected error on a route outside Huma.
func writeInternal(w http.ResponseWriter, r *http.Request, err error) {
	status, detail, h := internalAnswer(r.Context(), err)
	for k, v := range h {
		w.Header()[k] = v
	}
	writeProblem(w, status, detail)
}

// writeHumaInternal answers an unexpected error from Huma middleware.
func (s *Server) writeHumaInternal(ctx huma.Context, err error) {
	status, detail, h := internalAnswer(ctx.Context(), err)
	for k, v := range h {
		ctx.SetHeader(k, v[0])
	}
	_ = huma.WriteErr(s.api, ctx, status, detail)
}

// unavailableError is the Huma error of an outage.
func unavailableError() error {
	return huma.ErrorWithHeaders(huma.Error503ServiceUnavailable(outageDetail), http.Header{"Retry-After": {outageRetryAfter}})
}
