package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/ratelimit"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// consoleReq is one browser request to the console's routes: host
// console.test, with the given headers ("Name: value").
func (b *testBundle) consoleReq(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	req := httptest.NewRequest(method, "http://console.test"+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	b.server.ServeHTTP(rec, req)
	return recorded(rec)
}

const sameOriginHeader = "Origin: http://console.test"

// consoleSignIn registers email and signs in to the console; it returns the
// session cookie ("name=value") and the CSRF token.
func (b *testBundle) consoleSignIn(t *testing.T, email string) (cookie, csrf string) {
	t.Helper()
	b.register(t, email)
	res := b.consoleReq(t, http.MethodPost, "/console/api/session", `{"email":"`+email+`","password":"correct horse"}`, sameOriginHeader, "Sec-Fetch-Site: same-origin")
	if res.status != http.StatusOK {
		t.Fatalf("console sign in: %d %s", res.status, res.raw)
	}
	for _, c := range (&http.Response{Header: res.header}).Cookies() {
		if c.Name == consoleCookie {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/console" || c.MaxAge <= 0 {
				t.Fatalf("session cookie attributes: %+v", c)
			}
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		t.Fatalf("no session cookie set: %v", res.header)
	}
	if strings.Contains(string(res.raw), strings.TrimPrefix(cookie, consoleCookie+"=")) {
		t.Fatal("the session token is in the response body: the page's scripts could read it")
	}
	return cookie, res.body["csrf_token"].(string)
}

func TestConsoleSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cookie, csrf := b.consoleSignIn(t, "console@example.com")
	withCookie, withCSRF := "Cookie: "+cookie, csrfHeader+": "+csrf

	t.Run("the cookie and the CSRF token reach the API as the user", func(t *testing.T) {
		t.Parallel()
		res := b.consoleReq(t, http.MethodGet, "/console/api/v1/me", "", withCookie, withCSRF)
		if res.status != http.StatusOK || res.body["email"] != "console@example.com" {
			t.Fatalf("GET /v1/me through the console: %d %s", res.status, res.raw)
		}
		res = b.consoleReq(t, http.MethodPost, "/console/api/v1/tasks", `{"name":"x","schedule":"@hourly","action":{"type":"publish","event":"tick"}}`,
			withCookie, withCSRF, sameOriginHeader, "Sec-Fetch-Site: same-origin")
		if res.status != http.StatusCreated {
			t.Fatalf("POST /v1/tasks through the console: %d %s", res.status, res.raw)
		}
	})
	t.Run("API errors come back as the API answers them", func(t *testing.T) {
		t.Parallel()
		res := b.consoleReq(t, http.MethodPost, "/console/api/v1/tasks", `{"name":"x","schedule":"nope","action":{"type":"publish","event":"tick"}}`,
			withCookie, withCSRF, sameOriginHeader)
		if res.status != http.StatusUnprocessableEntity || !strings.Contains(res.body["detail"].(string), `schedule "nope" is not valid`) {
			t.Fatalf("bad cron through the console: %d %s", res.status, res.raw)
		}
	})
	t.Run("the session route gives the page its CSRF token back", func(t *testing.T) {
		t.Parallel()
		res := b.consoleReq(t, http.MethodGet, "/console/api/session", "", withCookie, "Sec-Fetch-Site: same-origin")
		if res.status != http.StatusOK || res.body["csrf_token"] != csrf {
			t.Fatalf("GET session: %d %s", res.status, res.raw)
		}
	})
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
	}{
		{"no cookie", http.MethodGet, "/console/api/v1/me", "", []string{withCSRF}, http.StatusUnauthorized},
		{"a bearer token is no session", http.MethodGet, "/console/api/v1/me", "", []string{withCSRF, "Authorization: Bearer x"}, http.StatusUnauthorized},
		{"a forged cookie", http.MethodGet, "/console/api/v1/me", "", []string{"Cookie: " + consoleCookie + "=forged", withCSRF}, http.StatusUnauthorized},
		{"no CSRF token", http.MethodGet, "/console/api/v1/me", "", []string{withCookie}, http.StatusForbidden},
		{"no CSRF token on a change", http.MethodPost, "/console/api/v1/tasks", "{}", []string{withCookie, sameOriginHeader}, http.StatusForbidden},
		{"a wrong CSRF token", http.MethodPost, "/console/api/v1/tasks", "{}", []string{withCookie, csrfHeader + ": " + csrf[:len(csrf)-2] + "xx", sameOriginHeader}, http.StatusForbidden},
		{"another origin", http.MethodPost, "/console/api/v1/tasks", "{}", []string{withCookie, withCSRF, "Origin: https://evil.test"}, http.StatusForbidden},
		{"no origin on a change", http.MethodDelete, "/console/api/v1/tasks/x", "", []string{withCookie, withCSRF}, http.StatusForbidden},
		{"a cross-site fetch", http.MethodGet, "/console/api/v1/me", "", []string{withCookie, withCSRF, "Sec-Fetch-Site: same-site"}, http.StatusForbidden},
		{"reading the CSRF token cross-site", http.MethodGet, "/console/api/session", "", []string{withCookie, "Sec-Fetch-Site: cross-site"}, http.StatusForbidden},
		{"signing in from another origin", http.MethodPost, "/console/api/session", `{"email":"console@example.com","password":"correct horse"}`, []string{"Origin: https://evil.test"}, http.StatusForbidden},
		{"a sign-in body over 4 KiB", http.MethodPost, "/console/api/session", `{"email":"` + strings.Repeat("a", 5000) + `"}`, []string{sameOriginHeader}, http.StatusRequestEntityTooLarge},
		{"a sign-in body that is not JSON", http.MethodPost, "/console/api/session", `email=a`, []string{sameOriginHeader}, http.StatusUnprocessableEntity},
		{"signing out without the CSRF token", http.MethodDelete, "/console/api/session", "", []string{withCookie, sameOriginHeader}, http.StatusForbidden},
		{"a wrong password", http.MethodPost, "/console/api/session", `{"email":"console@example.com","password":"wrong horse"}`, []string{sameOriginHeader}, http.StatusUnauthorized},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			t.Parallel()
			res := b.consoleReq(t, tc.method, tc.path, tc.body, tc.headers...)
			if res.status != tc.status || res.header.Get("Content-Type") != "application/problem+json" || res.body["detail"] == "" {
				t.Fatalf("%s %s: %d %s, want %d with a detail", tc.method, tc.path, res.status, res.raw, tc.status)
			}
		})
	}
}

func TestConsoleSignOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cookie, csrf := b.consoleSignIn(t, "leaver@example.com")
	res := b.consoleReq(t, http.MethodDelete, "/console/api/session", "", "Cookie: "+cookie, csrfHeader+": "+csrf, sameOriginHeader)
	if res.status != http.StatusNoContent {
		t.Fatalf("sign out: %d %s", res.status, res.raw)
	}
	cleared := false
	for _, c := range (&http.Response{Header: res.header}).Cookies() {
		cleared = cleared || (c.Name == consoleCookie && c.MaxAge < 0 && c.Path == "/console")
	}
	if !cleared {
		t.Fatalf("the session cookie is not cleared: %v", res.header["Set-Cookie"])
	}
}

func TestConsolePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{"/console", "/console/", "/console/assets/app.js", "/console/assets/style.css"} {
		res := b.consoleReq(t, http.MethodGet, path, "")
		csp := res.header.Get("Content-Security-Policy")
		if res.status != http.StatusOK || !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			!strings.Contains(csp, "connect-src 'self' ws://console.test wss://console.test;") {
			t.Fatalf("GET %s: %d, CSP %q", path, res.status, csp)
		}
	}
	if res := b.consoleReq(t, http.MethodGet, "/console/assets/app.js", ""); !strings.Contains(res.header.Get("Content-Type"), "javascript") {
		t.Fatalf("app.js served as %q", res.header.Get("Content-Type"))
	}
	// The session answer is JSON the page reads; nothing else is sent.
	var body map[string]any
	if res := b.consoleReq(t, http.MethodGet, "/console/api/session", ""); res.status != http.StatusUnauthorized || json.Unmarshal(res.raw, &body) != nil {
		t.Fatalf("session without a cookie: %d %s", res.status, res.raw)
	}
}

// TestConsoleSignInIsRateLimited: the console's sign-in spends the same
// per-address limit as /v1/auth/*, so it is no unlimited password oracle.
func TestConsoleSignInIsRateLimited(t *testing.T) {
	t.Parallel()
	b := &testBundle{server: New(Options{
		Pool: dbtest.NewPool(t), Registry: prometheus.NewRegistry(), PublicAPI: true, JWTSecret: testSecret, BcryptCost: 4,
		RateLimits: RateLimits{Auth: ratelimit.Rate{PerSecond: 0.01, Burst: 2}, User: generous},
	})}
	statuses := []int{}
	for range 3 {
		res := b.consoleReq(t, http.MethodPost, "/console/api/session", `{"email":"nobody@example.com","password":"wrong horse"}`, sameOriginHeader)
		statuses = append(statuses, res.status)
	}
	if statuses[0] != http.StatusUnauthorized || statuses[2] != http.StatusTooManyRequests {
		t.Fatalf("three sign-ins with a burst of 2: %v", statuses)
	}
}
