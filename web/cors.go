package web

import (
	"net/http"
	"strings"

	"github.com/go-chi/cors"
)

// CORS on the HTTP API, from SWITCHBOARD_ALLOWED_ORIGINS (the origins
// browsers may also open WebSockets from). A listed origin may call with
// credentials; "*" lets any origin call, never with credentials (the answer
// says Access-Control-Allow-Origin: * and no Allow-Credentials); with no
// origin listed no cross-origin call is allowed. Preflights answer 204
// whether or not the origin is allowed: the browser reads the refusal from
// the missing headers. The River UI, the internal routes and /metrics never
// answer cross-origin calls, nor do the console and the docs page.

var (
	corsMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete}
	// traceparent and tracestate: a browser app's OpenTelemetry
	// instrumentation sends them so its spans and the server's share a trace.
	corsHeaders = []string{"Authorization", "Content-Type", idempotencyHeader, "X-Request-ID", "Traceparent", "Tracestate", ProjectHeader}
	corsExposed = []string{"X-Request-ID", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
		"Retry-After", replayedHeader, "WWW-Authenticate", "Location"}
)

// corsMaxAge is how long a browser may cache a preflight, in seconds.
const corsMaxAge = 600

// corsHandler answers preflights and adds the CORS headers to API answers.
func corsHandler(origins []string) func(http.Handler) http.Handler {
	listed, anyOrigin := map[string]bool{}, false
	for _, o := range origins {
		o = normalOrigin(o)
		anyOrigin = anyOrigin || o == "*"
		listed[o] = o != "*"
	}
	opts := cors.Options{
		AllowedMethods: corsMethods, AllowedHeaders: corsHeaders, ExposedHeaders: corsExposed,
		MaxAge: corsMaxAge, OptionsPassthrough: true, // so preflights answer 204, below
	}
	credentialed := opts
	credentialed.AllowCredentials = true
	credentialed.AllowOriginFunc = func(_ *http.Request, origin string) bool { return listed[normalOrigin(origin)] }
	anyOpts := opts
	anyOpts.AllowedOrigins = []string{"*"}
	named, star := cors.New(credentialed), cors.New(anyOpts)
	noContent := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return func(next http.Handler) http.Handler {
		namedPre, namedReq := named.Handler(noContent), named.Handler(next)
		starPre, starReq := star.Handler(noContent), star.Handler(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !corsPath(r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
			useStar := anyOrigin && !listed[normalOrigin(r.Header.Get("Origin"))]
			switch {
			case preflight && useStar:
				starPre.ServeHTTP(w, r)
			case preflight:
				namedPre.ServeHTTP(w, r)
			case useStar:
				starReq.ServeHTTP(w, r)
			default:
				namedReq.ServeHTTP(w, r)
			}
		})
	}
}

// corsPath reports whether cross-origin calls may reach a path: not the
// console (its session is a cookie, for this origin's pages only) nor the
// docs page, River UI, internal routes or /metrics.
func corsPath(path string) bool {
	for _, p := range []string{riverUIPath, "/internal/", consolePath, docsPath} {
		if strings.HasPrefix(path, p) {
			return false
		}
	}
	return path != "/metrics"
}

// normalOrigin is an origin as compared: lower-cased, no trailing slash.
func normalOrigin(o string) string {
	return strings.TrimRight(strings.ToLower(strings.TrimSpace(o)), "/")
}
