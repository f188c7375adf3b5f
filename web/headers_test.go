package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// get sends a GET through the whole handler chain with the given Host.
func get(s *Server, path, host string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if host != "" {
		req.Host = host
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

func TestConsoleCSPIsBuiltFromASanitisedHost(t *testing.T) {
	t.Parallel()
	s := setup(t).server
	csp := get(s, consolePath+"/", "sb.example.com:8443").Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "connect-src 'self' ws://sb.example.com:8443 wss://sb.example.com:8443;") {
		t.Fatalf("a plain host: %s", csp)
	}
	for _, host := range []string{"evil.example; script-src *", "a b", "x.example/'unsafe-inline'", "x.example,*"} {
		csp := get(s, consolePath+"/", host).Header().Get("Content-Security-Policy")
		if strings.Contains(csp, "*") || strings.Contains(csp, "evil") || strings.Contains(csp, "unsafe") ||
			!strings.Contains(csp, "connect-src 'self';") || !strings.Contains(csp, "script-src 'self';") {
			t.Errorf("Host %q: %s", host, csp)
		}
	}
}

func TestDocsCannotBeFramedAndKeepNoToken(t *testing.T) {
	t.Parallel()
	s := setup(t).server
	for _, path := range []string{docsPath, docsPath + "/", docsPath + "/swagger-ui.css"} {
		rec := get(s, path, "")
		h := rec.Header()
		if rec.Code != http.StatusOK || h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s: %d, X-Frame-Options %q, CSP %q", path, rec.Code, h.Get("X-Frame-Options"), h.Get("Content-Security-Policy"))
		}
		if strings.Contains(rec.Body.String(), "persistAuthorization: true") {
			t.Errorf("%s: the page keeps the bearer token in localStorage (persistAuthorization)", path)
		}
	}
}

func TestConsoleRoutesAnswerNoCORS(t *testing.T) {
	t.Parallel()
	s := corsServer(t, "https://app.example")
	for _, preflight := range []bool{false, true} {
		for _, path := range []string{consoleAPI + "/session", consolePath + "/", docsPath} {
			rec := corsRequest(s, http.MethodGet, path, "https://app.example", preflight)
			if v := rec.Header().Get("Access-Control-Allow-Origin") + rec.Header().Get("Access-Control-Allow-Credentials"); v != "" {
				t.Errorf("%s (preflight %v) answers CORS: %q", path, preflight, v)
			}
		}
	}
	if rec := corsRequest(s, http.MethodGet, "/v1/me", "https://app.example", false); rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("the API answers no CORS to a listed origin: %v", rec.Header())
	}
}

// TestHeadAnswersLikeGet: uptime checkers send HEAD; every GET page and
// document answers it with the GET's status and headers and no body.
func TestHeadAnswersLikeGet(t *testing.T) {
	t.Parallel()
	s := setup(t).server
	for _, path := range []string{"/healthz/live", "/openapi.json", consolePath, consolePath + "/", docsPath, docsPath + "/", "/metrics"} {
		got := get(s, path, "")
		req := httptest.NewRequest(http.MethodHead, path, nil)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != got.Code || rec.Header().Get("Content-Type") != got.Header().Get("Content-Type") {
			t.Errorf("HEAD %s: %d %q, GET: %d %q", path, rec.Code, rec.Header().Get("Content-Type"), got.Code, got.Header().Get("Content-Type"))
		}
	}
	// A route with no GET still refuses HEAD.
	req := httptest.NewRequest(http.MethodHead, "/v1/auth/login", nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("HEAD /v1/auth/login: %d, want 405", rec.Code)
	}
}
