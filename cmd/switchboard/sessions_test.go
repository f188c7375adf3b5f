package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/mailtest"
)

// Sessions that end on every replica: each way of ending one, then the old
// credential on each of three replicas of one database, at its next
// request.

// requireRefusedEverywhere checks that token answers 401 on every replica.
func requireRefusedEverywhere(t *testing.T, servers []*testServer, token, after string) {
	t.Helper()
	for i, s := range servers {
		if status, body := call(t, http.MethodGet, s.URL+"/v1/me", nil, token); status != http.StatusUnauthorized {
			t.Fatalf("after %s, replica %d answered the old token %d %v", after, i, status, body)
		}
	}
}

func requireAcceptedEverywhere(t *testing.T, servers []*testServer, token, what string) {
	t.Helper()
	for i, s := range servers {
		if status, body := call(t, http.MethodGet, s.URL+"/v1/me", nil, token); status != http.StatusOK {
			t.Fatalf("%s: replica %d answered %d %v", what, i, status, body)
		}
	}
}

func login(t *testing.T, base, email, password string) string {
	t.Helper()
	status, body := call(t, http.MethodPost, base+"/v1/auth/login", map[string]string{"email": email, "password": password}, "")
	if status != http.StatusOK {
		t.Fatalf("login %s: %d %v", email, status, body)
	}
	return body["token"].(string)
}

func TestSessionsEndOnEveryReplica(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 3)
	a, b, c := servers[0], servers[1], servers[2]

	t.Run("logout", func(t *testing.T) {
		token, _ := registerUserAt(t, a.URL, "logout@example.com")
		other := login(t, c.URL, "logout@example.com", "correct horse")
		requireAcceptedEverywhere(t, servers, token, "before the logout")
		if status, body := call(t, http.MethodPost, b.URL+"/v1/auth/logout", nil, token); status != http.StatusNoContent {
			t.Fatalf("logout: %d %v", status, body)
		}
		requireRefusedEverywhere(t, servers, token, "a logout")
		requireAcceptedEverywhere(t, servers, other, "another token after the logout")
	})

	t.Run("password change", func(t *testing.T) {
		token, _ := registerUserAt(t, a.URL, "change@example.com")
		other := login(t, c.URL, "change@example.com", "correct horse")
		status, body := call(t, http.MethodPost, b.URL+"/v1/me/password", map[string]string{"current_password": "correct horse", "new_password": "battery staple"}, token)
		if status != http.StatusOK {
			t.Fatalf("change: %d %v", status, body)
		}
		requireRefusedEverywhere(t, servers, token, "a password change (the changing token)")
		requireRefusedEverywhere(t, servers, other, "a password change (another token)")
		requireAcceptedEverywhere(t, servers, body["token"].(string), "the token the change answered")
	})

	t.Run("admin reset link", func(t *testing.T) {
		token, id := registerUserAt(t, a.URL, "reset@example.com")
		status, body := call(t, http.MethodPost, c.URL+"/v1/admin/users/"+id+"/password-reset", nil, admin)
		if status != http.StatusOK {
			t.Fatalf("reset link: %d %v", status, body)
		}
		if status, body := call(t, http.MethodPost, b.URL+"/v1/auth/reset", map[string]string{"token": body["token"].(string), "password": "battery staple"}, ""); status != http.StatusNoContent {
			t.Fatalf("reset: %d %v", status, body)
		}
		requireRefusedEverywhere(t, servers, token, "a reset")
		login(t, a.URL, "reset@example.com", "battery staple")
	})

	t.Run("sign out everywhere", func(t *testing.T) {
		token, _ := registerUserAt(t, a.URL, "everywhere@example.com")
		other := login(t, b.URL, "everywhere@example.com", "correct horse")
		if status, body := call(t, http.MethodPost, c.URL+"/v1/me/sessions/revoke", nil, other); status != http.StatusNoContent {
			t.Fatalf("revoke: %d %v", status, body)
		}
		requireRefusedEverywhere(t, servers, token, "sign out everywhere")
		requireRefusedEverywhere(t, servers, other, "sign out everywhere")
	})

	t.Run("console sign-out", func(t *testing.T) {
		registerUserAt(t, a.URL, "console@example.com")
		cookie, csrf := consoleSignIn(t, a, "console@example.com", "correct horse")
		for i, s := range servers {
			if status := consoleGet(t, s, cookie, csrf, "/console/api/v1/me"); status != http.StatusOK {
				t.Fatalf("replica %d before the sign-out: %d", i, status)
			}
		}
		req := consoleRequest(t, b, http.MethodDelete, "/console/api/session", cookie, csrf)
		if res := do(t, req); res.StatusCode != http.StatusNoContent {
			t.Fatalf("console sign-out: %d", res.StatusCode)
		}
		for i, s := range servers {
			if status := consoleGet(t, s, cookie, csrf, "/console/api/v1/me"); status != http.StatusUnauthorized {
				t.Fatalf("replica %d let the signed-out cookie through the bridge: %d", i, status)
			}
			if status := consoleGet(t, s, cookie, csrf, "/console/api/session"); status != http.StatusUnauthorized {
				t.Fatalf("replica %d answered the signed-out cookie's session: %d", i, status)
			}
		}
		requireRefusedEverywhere(t, servers, cookie.Value, "a console sign-out (the cookie's token as a bearer)")
	})
}

func consoleRequest(t *testing.T, s *testServer, method, path string, cookie *http.Cookie, csrf string) *http.Request {
	t.Helper()
	req, _ := http.NewRequest(method, s.URL+path, nil)
	req.AddCookie(cookie)
	req.Header.Set("X-CSRF-Token", csrf)
	req.Header.Set("Origin", s.URL)
	return req
}

func consoleGet(t *testing.T, s *testServer, cookie *http.Cookie, csrf, path string) int {
	t.Helper()
	return do(t, consoleRequest(t, s, http.MethodGet, path, cookie, csrf)).StatusCode
}

func do(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// consoleSignIn signs in to the console as a browser would and returns the
// session cookie and the CSRF token.
func consoleSignIn(t *testing.T, s *testServer, email, password string) (*http.Cookie, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"email": email, "password": password})
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/console/api/session", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", s.URL)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(res.Body).Decode(&body)
	for _, c := range res.Cookies() {
		if c.Name == "switchboard_console" && res.StatusCode == http.StatusOK {
			return c, body["csrf_token"].(string)
		}
	}
	t.Fatalf("console sign-in: %d %v", res.StatusCode, body)
	return nil, ""
}

func TestRegistrationClosedOnEveryReplica(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	var servers []*testServer
	for range 3 {
		cfg := testConfig(t, dbURL)
		cfg.Registration = "closed"
		servers = append(servers, startServer(t, cfg))
	}
	for i, s := range servers {
		status, body := call(t, http.MethodPost, s.URL+"/v1/auth/register", map[string]string{"email": "walk-in@example.com", "password": "correct horse"}, "")
		if status != http.StatusForbidden || !strings.Contains(body["detail"].(string), "closed") {
			t.Fatalf("replica %d: register %d %v", i, status, body)
		}
		if status, body := call(t, http.MethodGet, s.URL+"/v1/auth/registration", nil, ""); status != http.StatusOK || body["registration"] != "closed" {
			t.Fatalf("replica %d: registration %d %v", i, status, body)
		}
	}
	// An operator still makes accounts.
	out := runAdminWithInput(t, servers[0], "", "create-user", "made@example.com")
	password := regexp.MustCompile(`password \(shown only now\): (\S+)`).FindStringSubmatch(out)
	if password == nil {
		t.Fatalf("create-user printed %q", out)
	}
	login(t, servers[2].URL, "made@example.com", password[1])
}

// runAdminWithInput runs switchboard admin with stdin piped ("" : a terminal).
func runAdminWithInput(t *testing.T, srv *testServer, stdin string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := adminCommand(t.Context(), srv.cfg, dbtest.Logger(t), args, stdinOf(stdin), &out); err != nil {
		t.Fatalf("switchboard admin %v: %v", args, err)
	}
	return out.String()
}

// stdinOf is a piped standard input holding s, or none ("").
func stdinOf(s string) io.Reader {
	if s == "" {
		return nil
	}
	return strings.NewReader(s)
}

func TestAdminCreateUserAndResetPassword(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, dbtest.NewDatabaseURL(t))
	cfg.PublicURL = "https://sb.example.com"
	srv := startServer(t, cfg)
	out := runAdminWithInput(t, srv, "piped horse\n", "create-user", "Piped@Example.com")
	if !strings.Contains(out, "created piped@example.com") || strings.Contains(out, "piped horse") {
		t.Fatalf("create-user printed %q", out)
	}
	token := login(t, srv.URL, "piped@example.com", "piped horse")
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"short\n", []string{"create-user", "short@example.com"}, "at least 8"},
		{"piped horse\n", []string{"create-user", "piped@example.com"}, "exists already"},
		{"piped horse\n", []string{"create-user", "not an address"}, "email"},
		{"", []string{"reset-password", "nobody@example.com"}, "no account"},
	} {
		err := adminCommand(t.Context(), srv.cfg, dbtest.Logger(t), tc.args, stdinOf(tc.stdin), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("admin %v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	out = runAdminWithInput(t, srv, "", "reset-password", "piped@example.com")
	link := regexp.MustCompile(`https://sb\.example\.com/console/#/reset\?token=(sbr_\S+)`).FindStringSubmatch(out)
	if link == nil {
		t.Fatalf("reset-password printed %q", out)
	}
	if status, body := call(t, http.MethodPost, srv.URL+"/v1/auth/reset", map[string]string{"token": link[1], "password": "battery staple"}, ""); status != http.StatusNoContent {
		t.Fatalf("reset: %d %v", status, body)
	}
	requireRefusedEverywhere(t, []*testServer{srv}, token, "a reset from the CLI's link")
}

// TestForgotPasswordMailsAWorkingLink: with SWITCHBOARD_SMTP_URL naming a
// real SMTP server, POST /v1/auth/forgot mails a link whose token resets
// the password on another replica.
func TestForgotPasswordMailsAWorkingLink(t *testing.T) {
	t.Parallel()
	smtp := mailtest.Start(t, mailtest.Options{User: "switchboard", Password: "mail-secret"})
	dbURL := dbtest.NewDatabaseURL(t)
	withMail := func() config.Config {
		cfg := testConfig(t, dbURL)
		cfg.SMTPURL, cfg.PublicURL = smtp.URL("no-reply@example.com"), "https://sb.example.com"
		return cfg
	}
	a, b := startServer(t, withMail()), startServer(t, withMail())
	token, _ := registerUserAt(t, a.URL, "forgot@example.com")
	status, known := call(t, http.MethodPost, a.URL+"/v1/auth/forgot", map[string]string{"email": "forgot@example.com"}, "")
	_, unknown := call(t, http.MethodPost, a.URL+"/v1/auth/forgot", map[string]string{"email": "stranger@example.com"}, "")
	if status != http.StatusAccepted || known["message"] != unknown["message"] || len(known) != 1 {
		t.Fatalf("forgot: %d %v / %v", status, known, unknown)
	}
	m := smtp.Next(t, 30*time.Second)
	link := regexp.MustCompile(`https://sb\.example\.com/console/#/reset\?token=(sbr_[A-Za-z0-9_-]{43})`).FindStringSubmatch(m.Body)
	if link == nil || m.To[0] != "forgot@example.com" || m.From != "no-reply@example.com" || m.AuthAs != "switchboard" {
		t.Fatalf("mail %+v", m)
	}
	if status, body := call(t, http.MethodPost, b.URL+"/v1/auth/reset", map[string]string{"token": link[1], "password": "battery staple"}, ""); status != http.StatusNoContent {
		t.Fatalf("reset with the mailed link: %d %v", status, body)
	}
	requireRefusedEverywhere(t, []*testServer{a, b}, token, "a reset by mail")
	login(t, b.URL, "forgot@example.com", "battery staple")
}
