package web

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"
)

// Bounds of an error answer, whatever the request: Huma reports one error
// per unexpected property and puts the whole object in each, so a body
// with n unknown keys would answer n copies of itself.
const (
	// maxErrorDetails is how many errors a problem lists; the rest are
	// counted in one last "and N more" entry.
	maxErrorDetails = 20
	// maxEchoedValue is the longest string value echoed back; objects and
	// arrays are never echoed.
	maxEchoedValue = 64
	// maxLocation, maxMessage and maxDetail bound the texts of a problem,
	// which may quote the client's keys and values.
	maxLocation = 256
	maxMessage  = 512
	maxDetail   = 1024
	// maxAuthBody bounds request bodies on /v1/auth/*: an email and a
	// password, readable without an account.
	maxAuthBody = 4 << 10
)

// boundProblem is a Huma transformer that keeps every problem answer small:
// at most maxErrorDetails errors, short texts, and only short scalar values.
func boundProblem(_ huma.Context, _ string, v any) (any, error) {
	p, ok := v.(*huma.ErrorModel)
	if !ok {
		return v, nil
	}
	out := *p
	out.Detail = truncate(p.Detail, maxDetail)
	n := len(p.Errors)
	out.Errors = make([]*huma.ErrorDetail, 0, min(n, maxErrorDetails+1))
	for _, d := range p.Errors[:min(n, maxErrorDetails)] {
		if d != nil {
			out.Errors = append(out.Errors, boundDetail(d))
		}
	}
	if n > maxErrorDetails {
		out.Errors = append(out.Errors, &huma.ErrorDetail{Message: fmt.Sprintf("and %d more errors", n-maxErrorDetails)})
	}
	if len(out.Errors) == 0 {
		out.Errors = nil
	}
	return &out, nil
}

func boundDetail(d *huma.ErrorDetail) *huma.ErrorDetail {
	return &huma.ErrorDetail{
		Message:  truncate(d.Message, maxMessage),
		Location: truncate(d.Location, maxLocation),
		Value:    boundValue(d.Value),
	}
}

// boundValue keeps numbers, booleans and short strings; longer strings are
// cut, objects and arrays dropped.
func boundValue(v any) any {
	switch v := v.(type) {
	case string:
		return truncate(v, maxEchoedValue)
	case bool, float64, float32, int, int64, int32, uint, uint64, uint32:
		return v
	}
	return nil
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "") + "…"
}

// capAuthBodies is an OnAddOperation hook: /v1/auth/* bodies are at most
// maxAuthBody bytes (413 over it), so no account is needed to make the
// server parse and validate a large body.
func capAuthBodies(_ *huma.OpenAPI, op *huma.Operation) {
	if strings.HasPrefix(op.Path, "/v1/auth/") && (op.MaxBodyBytes == 0 || op.MaxBodyBytes > maxAuthBody) {
		op.MaxBodyBytes = maxAuthBody
	}
}

// notFound answers an unknown path with a problem, like every other error.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, http.StatusNotFound, "no route "+truncate(r.URL.Path, maxLocation)+"; the API is described at /openapi.json")
}

// methodNotAllowed answers a known path with another method with a
// problem and the Allow header.
func methodNotAllowed(router chi.Router) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if router.Match(chi.NewRouteContext(), m, r.URL.Path) {
				allowed = append(allowed, m)
			}
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeProblem(w, http.StatusMethodNotAllowed, r.Method+" is not allowed here; allowed: "+strings.Join(allowed, ", "))
	}
}
