package web

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/mail"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/mailtest"
)

var resetLinkPattern = regexp.MustCompile(`\S*/console/#/reset\?token=(sbr_[A-Za-z0-9_-]{43})`)

func setupMail(t *testing.T, smtp *mailtest.Server) *testBundle {
	t.Helper()
	sender, err := mail.Parse(smtp.URL("switchboard@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{
		Pool: dbtest.NewPool(t), Registry: prometheus.NewRegistry(), PublicAPI: true, JWTSecret: testSecret, BcryptCost: 4,
		RateLimits: RateLimits{Auth: generous, User: generous}, PublicURL: "https://sb.example.com", Mailer: sender,
	})
	t.Cleanup(s.Close)
	return &testBundle{server: s}
}

func TestForgotPassword(t *testing.T) {
	t.Parallel()
	smtp := mailtest.Start(t, mailtest.Options{})
	b := setupMail(t, smtp)
	token, _ := b.register(t, "forgetful@example.com")

	known := b.do(t, http.MethodPost, "/v1/auth/forgot", map[string]string{"email": "Forgetful@example.com"}, "")
	unknown := b.do(t, http.MethodPost, "/v1/auth/forgot", map[string]string{"email": "nobody@example.com"}, "")
	if known.status != http.StatusAccepted || unknown.status != http.StatusAccepted || string(known.raw) != string(unknown.raw) {
		t.Fatalf("known %d %s, unknown %d %s: want the same 202", known.status, known.raw, unknown.status, unknown.raw)
	}
	m := smtp.Next(t, 30*time.Second)
	link := resetLinkPattern.FindStringSubmatch(m.Body)
	if len(m.To) != 1 || m.To[0] != "forgetful@example.com" || link == nil || !strings.HasPrefix(link[0], "https://sb.example.com/console/#/reset?token=") {
		t.Fatalf("mail to %v: %q", m.To, m.Body)
	}
	res := b.do(t, http.MethodPost, "/v1/auth/reset", map[string]string{"token": link[1], "password": "battery staple"}, "")
	if res.status != http.StatusNoContent {
		t.Fatalf("reset with the mailed link: %d %s", res.status, res.raw)
	}
	requireSignedOut(t, b, token, "every session")
	if res := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "forgetful@example.com", "password": "battery staple"}, ""); res.status != http.StatusOK {
		t.Fatalf("login with the new password: %d", res.status)
	}
	requireProblem(t, b.do(t, http.MethodPost, "/v1/auth/reset", map[string]string{"token": link[1], "password": "another one"}, ""), http.StatusBadRequest)
	select {
	case m := <-smtp.Mail:
		t.Fatalf("a mail to an unknown address: %+v", m)
	default:
	}
}

func TestForgotPasswordLimitsMailPerAddress(t *testing.T) {
	t.Parallel()
	smtp := mailtest.Start(t, mailtest.Options{})
	b := setupMail(t, smtp)
	b.register(t, "often@example.com")
	for range 4 {
		if res := b.do(t, http.MethodPost, "/v1/auth/forgot", map[string]string{"email": "often@example.com"}, ""); res.status != http.StatusAccepted {
			t.Fatalf("%d %s", res.status, res.raw)
		}
	}
	b.server.Close() // every send has run
	if got := len(smtp.Mail); got != 3 {
		t.Fatalf("%d mails for 4 asks, want 3 (3 an hour per address)", got)
	}
}

func TestResetPasswordBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"unknown token", `{"token":"sbr_` + strings.Repeat("A", 43) + `","password":"battery staple"}`, http.StatusBadRequest},
		{"malformed token", `{"token":"x","password":"battery staple"}`, http.StatusBadRequest},
		{"short password", `{"token":"sbr_` + strings.Repeat("A", 43) + `","password":"short"}`, http.StatusUnprocessableEntity},
		{"missing token", `{"password":"battery staple"}`, http.StatusUnprocessableEntity},
		{"token too long", `{"token":"` + strings.Repeat("A", 300) + `","password":"battery staple"}`, http.StatusUnprocessableEntity},
	} {
		requireProblem(t, b.do(t, http.MethodPost, "/v1/auth/reset", tc.body, ""), tc.status)
	}
	for _, body := range []string{`{"email":"not an address"}`, `{"email":"opſ@example.com"}`, `{}`} {
		requireProblem(t, b.do(t, http.MethodPost, "/v1/auth/forgot", body, ""), http.StatusUnprocessableEntity)
	}
}

func TestAdminPasswordReset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin, _ := b.registerAdmin(t, "resetter@example.com")
	user, id := b.register(t, "locked-out@example.com")
	requireProblem(t, b.do(t, http.MethodPost, "/v1/admin/users/"+id+"/password-reset", nil, user), http.StatusForbidden)
	res := b.do(t, http.MethodPost, "/v1/admin/users/"+id+"/password-reset", nil, admin)
	link := resetLinkPattern.FindStringSubmatch(res.body["url"].(string))
	if res.status != http.StatusOK || link == nil || link[1] != res.body["token"] {
		t.Fatalf("link: %d %s", res.status, res.raw)
	}
	if res := b.do(t, http.MethodGet, "/v1/me", nil, user); res.status != http.StatusOK {
		t.Fatalf("making a link ends no session: %d", res.status)
	}
	if res := b.do(t, http.MethodPost, "/v1/auth/reset", map[string]string{"token": link[1], "password": "battery staple"}, ""); res.status != http.StatusNoContent {
		t.Fatalf("reset: %d %s", res.status, res.raw)
	}
	requireSignedOut(t, b, user, "every session")
	requireProblem(t, b.do(t, http.MethodPost, "/v1/admin/users/00000000-0000-0000-0000-000000000001/password-reset", nil, admin), http.StatusNotFound)
}

func TestRegistrationPolicy(t *testing.T) {
	t.Parallel()
	policy := func(t *testing.T, r accounts.Registration) *testBundle {
		return &testBundle{server: New(Options{
			Pool: dbtest.NewPool(t), Registry: prometheus.NewRegistry(), PublicAPI: true, JWTSecret: testSecret, BcryptCost: 4,
			RateLimits: RateLimits{Auth: generous, User: generous}, Registration: r,
		})}
	}
	body := func(invite string) map[string]string {
		return map[string]string{"email": "new@example.com", "password": "correct horse", "invite": invite}
	}
	for _, tc := range []struct {
		policy accounts.Registration
		invite string
		status int
		detail string
	}{
		{"", "", http.StatusCreated, ""},
		{accounts.RegistrationOpen, "sbi_ignored", http.StatusCreated, ""},
		{accounts.RegistrationClosed, "", http.StatusForbidden, "registration is closed"},
		{accounts.RegistrationClosed, "sbi_x", http.StatusForbidden, "registration is closed"},
		{accounts.RegistrationInvite, "", http.StatusForbidden, "needs an invite"},
		{accounts.RegistrationInvite, "sbi_x", http.StatusForbidden, "cannot redeem invites"},
	} {
		b := policy(t, tc.policy)
		want := string(tc.policy)
		if want == "" {
			want = "open"
		}
		if res := b.do(t, http.MethodGet, "/v1/auth/registration", nil, ""); res.status != http.StatusOK || res.body["registration"] != want || len(res.body) != 1 {
			t.Fatalf("%s: registration %d %s", tc.policy, res.status, res.raw)
		}
		res := b.do(t, http.MethodPost, "/v1/auth/register", body(tc.invite), "")
		if res.status != tc.status || tc.detail != "" && !strings.Contains(res.body["detail"].(string), tc.detail) {
			t.Fatalf("%s with invite %q: %d %s", tc.policy, tc.invite, res.status, res.raw)
		}
		login := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "new@example.com", "password": "correct horse"}, "")
		if (login.status == http.StatusOK) != (tc.status == http.StatusCreated) {
			t.Fatalf("%s: a refused registration made an account, or an accepted one none: login %d", tc.policy, login.status)
		}
	}
}
