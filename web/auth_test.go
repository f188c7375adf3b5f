package web

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestRegister(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("created", func(t *testing.T) {
		t.Parallel()
		res := b.do(t, http.MethodPost, "/v1/auth/register", map[string]string{"email": "New@Example.com", "password": "12345678"}, "")
		if res.status != http.StatusCreated {
			t.Fatalf("status %d: %s", res.status, res.raw)
		}
		u := res.body["user"].(map[string]any)
		if u["email"] != "new@example.com" || u["role"] != "user" || res.body["token"] == "" {
			t.Fatalf("body: %s", res.raw)
		}
		exp, err := time.Parse(time.RFC3339, res.body["expires_at"].(string))
		if err != nil || time.Until(exp) < 23*time.Hour || time.Until(exp) > 25*time.Hour {
			t.Fatalf("expires_at %v (%v)", res.body["expires_at"], err)
		}
	})
	t.Run("duplicate email in another case", func(t *testing.T) {
		t.Parallel()
		b.register(t, "dup@example.com")
		res := b.do(t, http.MethodPost, "/v1/auth/register", map[string]string{"email": "DUP@example.com", "password": "12345678"}, "")
		requireProblem(t, res, http.StatusConflict)
	})
	for _, tc := range []struct {
		name   string
		body   any
		status int
	}{
		{"short password", `{"email":"a1@example.com","password":"1234567"}`, http.StatusUnprocessableEntity},
		{"bad email", `{"email":"not-an-email","password":"12345678"}`, http.StatusUnprocessableEntity},
		{"missing password", `{"email":"a2@example.com"}`, http.StatusUnprocessableEntity},
		{"missing email", `{"password":"12345678"}`, http.StatusUnprocessableEntity},
		{"unknown field", `{"email":"a3@example.com","password":"12345678","role":"admin"}`, http.StatusUnprocessableEntity},
		{"malformed json", `{"email":`, http.StatusBadRequest},
		{"empty body", ``, http.StatusBadRequest},
		{"password over 72 bytes", `{"email":"a5@example.com","password":"` + strings.Repeat("é", 40) + `"}`, http.StatusUnprocessableEntity},
		{"too large", `{"email":"a4@example.com","password":"` + strings.Repeat("x", 1<<20) + `"}`, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := b.do(t, http.MethodPost, "/v1/auth/register", tc.body, "")
			requireProblem(t, res, tc.status)
		})
	}
	t.Run("bad input changes nothing", func(t *testing.T) {
		t.Parallel()
		b.do(t, http.MethodPost, "/v1/auth/register", `{"email":"nothing@example.com","password":"short"}`, "")
		res := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "nothing@example.com", "password": "short"}, "")
		requireProblem(t, res, http.StatusUnauthorized) // no such account
		res = b.do(t, http.MethodPost, "/v1/auth/register", map[string]string{"email": "nothing@example.com", "password": "12345678"}, "")
		if res.status != http.StatusCreated {
			t.Fatalf("a rejected registration left a row behind: %d %s", res.status, res.raw)
		}
	})
}

func TestLogin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, id := b.register(t, "login@example.com")
	t.Run("ok", func(t *testing.T) {
		t.Parallel()
		res := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "LOGIN@example.com", "password": "correct horse"}, "")
		if res.status != http.StatusOK || res.body["user"].(map[string]any)["id"] != id {
			t.Fatalf("login: %d %s", res.status, res.raw)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		t.Parallel()
		res := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "login@example.com", "password": "wrong horse"}, "")
		requireProblem(t, res, http.StatusUnauthorized)
	})
	t.Run("unknown email", func(t *testing.T) {
		t.Parallel()
		res := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "nobody@example.com", "password": "correct horse"}, "")
		requireProblem(t, res, http.StatusUnauthorized)
	})
	t.Run("missing fields", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, b.do(t, http.MethodPost, "/v1/auth/login", `{}`, ""), http.StatusUnprocessableEntity)
	})
	t.Run("short password is just wrong", func(t *testing.T) {
		t.Parallel()
		res := b.do(t, http.MethodPost, "/v1/auth/login", map[string]string{"email": "login@example.com", "password": "short"}, "")
		requireProblem(t, res, http.StatusUnauthorized)
	})
}

func TestMe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, id := b.register(t, "me@example.com")
	t.Run("ok", func(t *testing.T) {
		t.Parallel()
		res := b.do(t, http.MethodGet, "/v1/me", nil, token)
		if res.status != 200 || res.body["id"] != id || res.body["email"] != "me@example.com" || res.body["role"] != "user" || res.body["created_at"] == nil {
			t.Fatalf("me: %d %s", res.status, res.raw)
		}
	})
	sign := func(method jwt.SigningMethod, key any, c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(method, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := time.Now()
	for _, tc := range []struct {
		name, token string
	}{
		{"missing", ""},
		{"garbage", "not.a.token"},
		{"expired", sign(jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": id, "role": "user", "iss": "switchboard", "exp": now.Add(-time.Hour).Unix()})},
		{"other secret", sign(jwt.SigningMethodHS256, []byte("another-secret-another-secret"), jwt.MapClaims{"sub": id, "role": "user", "iss": "switchboard", "exp": now.Add(time.Hour).Unix()})},
		{"alg none", sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": id, "role": "admin", "iss": "switchboard", "exp": now.Add(time.Hour).Unix()})},
		{"no expiry", sign(jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": id, "role": "user", "iss": "switchboard"})},
		{"unknown role", sign(jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": id, "role": "root", "iss": "switchboard", "exp": now.Add(time.Hour).Unix()})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := b.do(t, http.MethodGet, "/v1/me", nil, tc.token)
			requireProblem(t, res, http.StatusUnauthorized)
			if res.header.Get("WWW-Authenticate") == "" {
				t.Fatal("no WWW-Authenticate header")
			}
		})
	}
	t.Run("scheme is case-insensitive", func(t *testing.T) {
		t.Parallel()
		rec := b.api(t).Get("/v1/me", "Authorization: bearer "+token)
		if rec.Code != http.StatusOK {
			t.Fatalf("lower-case scheme: %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("expired says so", func(t *testing.T) {
		t.Parallel()
		tok := sign(jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": id, "role": "user", "iss": "switchboard", "exp": now.Add(-time.Hour).Unix()})
		if d := b.do(t, http.MethodGet, "/v1/me", nil, tok).body["detail"]; !strings.Contains(d.(string), "expired") {
			t.Fatalf("detail %q", d)
		}
	})
}
