package web

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// refuseUnknownQuery answers 422 to a request whose query string names a
// parameter its operation does not take: a misspelt filter
// (`GET /v1/runs?task_id=…`) would otherwise be ignored and the answer
// look like a filtered one.
func (s *Server) refuseUnknownQuery(ctx huma.Context, next func(huma.Context)) {
	u := ctx.URL()
	query := u.Query()
	if len(query) == 0 {
		next(ctx)
		return
	}
	var known []string
	for _, p := range ctx.Operation().Parameters {
		if p.In == "query" {
			known = append(known, p.Name)
		}
	}
	for name := range query {
		if !slices.Contains(known, name) {
			_ = huma.WriteErr(s.api, ctx, http.StatusUnprocessableEntity, unknownQueryDetail(name, known),
				&huma.ErrorDetail{Message: "unknown query parameter", Location: "query." + truncate(name, 64)})
			return
		}
	}
	next(ctx)
}

func unknownQueryDetail(name string, known []string) string {
	if len(known) == 0 {
		return fmt.Sprintf("unknown query parameter %q: this route takes none", truncate(name, 64))
	}
	slices.Sort(known)
	return fmt.Sprintf("unknown query parameter %q: this route takes %s", truncate(name, 64), strings.Join(known, ", "))
}

// documentCommonProblems adds to an operation's document the problems any
// operation may answer: 422 for a query parameter it does not take and,
// under /v1/, 503 while the database is unavailable (unavailable.go).
func documentCommonProblems(_ *huma.OpenAPI, op *huma.Operation) {
	if op.Responses == nil {
		return
	}
	problem := problemResponse(op)
	if problem == nil {
		return // only a default error answer, which covers these too
	}
	if _, ok := op.Responses["422"]; !ok {
		op.Responses["422"] = &huma.Response{Description: http.StatusText(http.StatusUnprocessableEntity) + ": a query parameter this operation does not take", Content: problem.Content}
	}
	if _, ok := op.Responses["503"]; !ok && strings.HasPrefix(op.Path, "/v1/") {
		op.Responses["503"] = &huma.Response{
			Description: http.StatusText(http.StatusServiceUnavailable) + ": the database is unavailable; try again after Retry-After",
			Content:     problem.Content,
			Headers:     map[string]*huma.Param{"Retry-After": {Description: "seconds to wait before trying again", Schema: &huma.Schema{Type: huma.TypeInteger}}},
		}
	}
}

// problemResponse is op's lowest documented 4xx answer (a problem+json
// body, the general one: 400, 401 or 404 before a 409 or 429 that may carry
// a richer problem), whose content other documented problems reuse; nil
// when op documents none.
func problemResponse(op *huma.Operation) *huma.Response {
	for _, code := range slices.Sorted(maps.Keys(op.Responses)) {
		if r := op.Responses[code]; code != "" && code[0] == '4' && r.Content != nil {
			return r
		}
	}
	return nil
}
