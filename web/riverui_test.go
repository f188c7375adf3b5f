package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRiverUI(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)
	userToken, _ := b.register(t, "plain@example.com")
	b.registerAdmin(t, "boss@example.com")

	get := func(t *testing.T, path string, prepare func(*http.Request)) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if prepare != nil {
			prepare(req)
		}
		rec := httptest.NewRecorder()
		b.server.ServeHTTP(rec, req)
		return rec
	}
	login := func(t *testing.T, email string) *http.Response {
		t.Helper()
		res := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": email, "password": "correct horse"}, "")
		if res.status != 200 {
			t.Fatalf("login: %d %s", res.status, res.raw)
		}
		return &http.Response{Header: res.header}
	}

	t.Run("anonymous gets 401 with a basic-auth challenge", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{"/riverui/", "/riverui/api/jobs?state=available"} {
			rec := get(t, p, nil)
			if rec.Code != http.StatusUnauthorized || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Basic ") {
				t.Fatalf("%s: %d %v", p, rec.Code, rec.Header())
			}
		}
		if rec := get(t, "/riverui", nil); rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != "/riverui/" {
			t.Fatalf("/riverui: %d %v", rec.Code, rec.Header())
		}
	})
	t.Run("wrong password is 401", func(t *testing.T) {
		t.Parallel()
		rec := get(t, "/riverui/", func(r *http.Request) { r.SetBasicAuth("boss@example.com", "wrong password") })
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("%d", rec.Code)
		}
	})
	t.Run("a user who is not an admin gets 403", func(t *testing.T) {
		t.Parallel()
		for name, prepare := range map[string]func(*http.Request){
			"bearer": func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+userToken) },
			"basic":  func(r *http.Request) { r.SetBasicAuth("plain@example.com", "correct horse") },
		} {
			if rec := get(t, "/riverui/", prepare); rec.Code != http.StatusForbidden {
				t.Errorf("%s: %d", name, rec.Code)
			}
		}
		if c := login(t, "plain@example.com").Cookies(); len(c) != 0 {
			t.Fatalf("a plain user got a River UI cookie: %v", c)
		}
	})
	t.Run("a signed-out cookie is refused", func(t *testing.T) {
		t.Parallel()
		res := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "boss@example.com", "password": "correct horse"}, "")
		c := (&http.Response{Header: res.header}).Cookies()[0]
		withCookie := func(r *http.Request) { r.AddCookie(c) }
		if rec := get(t, "/riverui/api/queues", withCookie); rec.Code != http.StatusOK {
			t.Fatalf("before the logout: %d", rec.Code)
		}
		if out := b.do(t, http.MethodPost, "/v1/auth/logout", nil, res.body["token"].(string)); out.status != http.StatusNoContent {
			t.Fatalf("logout: %d %s", out.status, out.raw)
		}
		rec := get(t, "/riverui/api/queues", withCookie)
		if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "signed out") {
			t.Fatalf("after the logout: %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("an admin by basic auth gets the UI and its API", func(t *testing.T) {
		t.Parallel()
		basic := func(r *http.Request) { r.SetBasicAuth("boss@example.com", "correct horse") }
		rec := get(t, "/riverui/", basic)
		if rec.Code != 200 || !strings.Contains(rec.Header().Get("Content-Type"), "text/html") || !strings.Contains(rec.Body.String(), "<html") {
			t.Fatalf("UI: %d %s", rec.Code, rec.Header())
		}
		rec = get(t, "/riverui/api/jobs?state=available", basic)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"data"`) {
			t.Fatalf("UI API: %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("an admin's login sets the session cookie the UI uses", func(t *testing.T) {
		t.Parallel()
		cookies := login(t, "boss@example.com").Cookies()
		if len(cookies) != 1 {
			t.Fatalf("cookies: %v", cookies)
		}
		c := cookies[0]
		if c.Name != sessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/riverui" || c.MaxAge <= 0 {
			t.Fatalf("cookie: %+v", c)
		}
		rec := get(t, "/riverui/api/queues", func(r *http.Request) { r.AddCookie(c) })
		if rec.Code != 200 {
			t.Fatalf("with the cookie: %d %s", rec.Code, rec.Body)
		}
		req := httptest.NewRequest(http.MethodPost, "/riverui/api/jobs/cancel", strings.NewReader(`{"ids":["1"]}`))
		req.AddCookie(c)
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		rec = httptest.NewRecorder()
		b.server.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Fatalf("cross-site POST: %d", rec.Code)
		}
		if rec := get(t, "/riverui/", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: sessionCookie, Value: "forged"}) }); rec.Code != http.StatusUnauthorized {
			t.Fatalf("forged cookie: %d", rec.Code)
		}
	})
}

// TestRiverUIBasicAuthIsRateLimited: basic auth checks passwords, so wrong
// guesses spend the same per-address limit as /v1/auth/login.
func TestRiverUIBasicAuthIsRateLimited(t *testing.T) {
	t.Parallel()
	// A burst of 8 refilled over a minute: a loaded machine's slow bcrypt
	// cannot refill the bucket between guesses.
	b := setupJobsLimits(t, RateLimits{Auth: perMinute(8)})
	b.registerAdmin(t, "boss@example.com")
	guess := func(remote, password string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/riverui/", nil)
		req.RemoteAddr = remote
		req.SetBasicAuth("boss@example.com", password)
		rec := httptest.NewRecorder()
		b.server.ServeHTTP(rec, req)
		return rec
	}
	var statuses []int
	for i := range 10 {
		statuses = append(statuses, guess("198.51.100.7:4000", "wrong guess "+strings.Repeat("x", i)).Code)
	}
	for i, s := range statuses {
		if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i < 8]; s != want {
			t.Fatalf("guess %d: %d, want %d (all: %v)", i+1, s, want, statuses)
		}
	}
	rec := guess("198.51.100.7:4000", "correct horse")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("right password after the limit: %d %v", rec.Code, rec.Header())
	}
	if rec := guess("198.51.100.8:4000", "correct horse"); rec.Code != http.StatusOK {
		t.Fatalf("another address is not limited: %d %s", rec.Code, rec.Body)
	}
}
