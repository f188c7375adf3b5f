package web

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// requireSignedOut checks that token is refused with a 401 that says why.
func requireSignedOut(t *testing.T, b *testBundle, token, why string) {
	t.Helper()
	res := b.do(t, http.MethodGet, "/v1/me", nil, token)
	requireProblem(t, res, http.StatusUnauthorized)
	if d := res.body["detail"].(string); !strings.Contains(d, why) {
		t.Fatalf("detail %q, want it to say %q", d, why)
	}
}

func TestLogout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _ := b.register(t, "logout@example.com")
	other := b.loginToken(t, "logout@example.com")
	if res := b.do(t, http.MethodPost, "/v1/auth/logout", nil, token); res.status != http.StatusNoContent {
		t.Fatalf("logout: %d %s", res.status, res.raw)
	}
	requireSignedOut(t, b, token, "signed out")
	requireProblem(t, b.do(t, http.MethodPost, "/v1/auth/logout", nil, token), http.StatusUnauthorized)
	if res := b.do(t, http.MethodGet, "/v1/me", nil, other); res.status != http.StatusOK {
		t.Fatalf("another token of the account after the logout: %d %s", res.status, res.raw)
	}
	requireProblem(t, b.do(t, http.MethodPost, "/v1/auth/logout", nil, ""), http.StatusUnauthorized)

	t.Run("a token from before jti is named by its hash", func(t *testing.T) {
		t.Parallel()
		_, id := b.register(t, "old-token@example.com")
		old := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub": id, "role": "user", "iss": tokenIssuer, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
		})
		raw, err := old.SignedString(testSecret)
		if err != nil {
			t.Fatal(err)
		}
		if res := b.do(t, http.MethodGet, "/v1/me", nil, raw); res.status != http.StatusOK {
			t.Fatalf("a token without jti or gen: %d %s", res.status, res.raw)
		}
		if res := b.do(t, http.MethodPost, "/v1/auth/logout", nil, raw); res.status != http.StatusNoContent {
			t.Fatalf("logout: %d %s", res.status, res.raw)
		}
		requireSignedOut(t, b, raw, "signed out")
	})
}

func TestRevokeSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, _ := b.register(t, "everywhere@example.com")
	c := b.loginToken(t, "everywhere@example.com")
	if res := b.do(t, http.MethodPost, "/v1/me/sessions/revoke", nil, a); res.status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", res.status, res.raw)
	}
	requireSignedOut(t, b, a, "every session")
	requireSignedOut(t, b, c, "every session")
	fresh := b.loginToken(t, "everywhere@example.com")
	if res := b.do(t, http.MethodGet, "/v1/me", nil, fresh); res.status != http.StatusOK {
		t.Fatalf("a login after: %d %s", res.status, res.raw)
	}
}

func TestChangePassword(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _ := b.register(t, "change@example.com")
	other := b.loginToken(t, "change@example.com")
	change := func(token, current, next string) response {
		return b.do(t, http.MethodPost, "/v1/me/password", map[string]string{"current_password": current, "new_password": next}, token)
	}
	t.Run("refusals change nothing", func(t *testing.T) {
		requireProblem(t, change(token, "wrong horse", "battery staple"), http.StatusForbidden)
		requireProblem(t, change(token, "correct horse", "short"), http.StatusUnprocessableEntity)
		requireProblem(t, change(token, "correct horse", strings.Repeat("é", 40)), http.StatusUnprocessableEntity)
		requireProblem(t, b.do(t, http.MethodPost, "/v1/me/password", `{"current_password":"correct horse"}`, token), http.StatusUnprocessableEntity)
		requireProblem(t, change("", "correct horse", "battery staple"), http.StatusUnauthorized)
		if res := b.do(t, http.MethodGet, "/v1/me", nil, other); res.status != http.StatusOK {
			t.Fatalf("after refused changes: %d", res.status)
		}
	})
	res := change(token, "correct horse", "battery staple")
	if res.status != http.StatusOK || res.body["token"] == "" || res.body["user"].(map[string]any)["email"] != "change@example.com" {
		t.Fatalf("change: %d %s", res.status, res.raw)
	}
	fresh := res.body["token"].(string)
	requireSignedOut(t, b, token, "every session")
	requireSignedOut(t, b, other, "every session")
	if res := b.do(t, http.MethodGet, "/v1/me", nil, fresh); res.status != http.StatusOK {
		t.Fatalf("the answer's token: %d %s", res.status, res.raw)
	}
	login := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "change@example.com", "password": "battery staple"}, "")
	if login.status != http.StatusOK {
		t.Fatalf("login with the new password: %d", login.status)
	}
}

func TestAPIKeysCannotEndSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _ := b.register(t, "keyholder@example.com")
	res := b.do(t, http.MethodPost, "/v1/api-keys", map[string]any{"name": "k"}, token)
	key := res.body["secret"].(string)
	for _, path := range []string{"/v1/auth/logout", "/v1/me/sessions/revoke"} {
		requireProblem(t, b.do(t, http.MethodPost, path, nil, key), http.StatusForbidden)
	}
	requireProblem(t, b.do(t, http.MethodPost, "/v1/me/password", map[string]string{"current_password": "correct horse", "new_password": "battery staple"}, key), http.StatusForbidden)
	if res := b.do(t, http.MethodGet, "/v1/me", nil, token); res.status != http.StatusOK {
		t.Fatalf("the token after: %d", res.status)
	}
}

// TestPasswordHashingIsBounded: with the replica's one hashing slot busy
// (a login for an unknown address, whose dummy hash has the configured,
// slow cost), another login is answered 503 with Retry-After instead of
// piling more bcrypt onto the CPUs.
func TestPasswordHashingIsBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s := New(Options{
		Pool: dbtest.NewPool(t), Registry: reg, PublicAPI: true, JWTSecret: testSecret,
		BcryptCost: 13, PasswordConcurrency: 1, PasswordWait: 10 * time.Millisecond,
		RateLimits: RateLimits{Auth: generous, User: generous},
	})
	b := &testBundle{server: s}
	login := func() response {
		return b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "nobody@example.com", "password": "correct horse"}, "")
	}
	var wg sync.WaitGroup
	var first response
	wg.Go(func() { first = login() })
	inFlight := func() float64 {
		g, _ := reg.Gather()
		for _, f := range g {
			if f.GetName() == "switchboard_password_hashes_in_flight" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	testwait.For(t, 30*time.Second, "the first login holds the hashing slot", func() bool { return inFlight() == 1 })
	res := login()
	wg.Wait()
	requireProblem(t, res, http.StatusServiceUnavailable)
	if res.header.Get("Retry-After") != "1" || !strings.Contains(res.body["detail"].(string), "too many password checks") {
		t.Fatalf("busy: %v %s", res.header, res.raw)
	}
	if first.status != http.StatusUnauthorized {
		t.Fatalf("the first login: %d %s", first.status, first.raw)
	}
}
