package web

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/ratelimit"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// perMinute is burst requests per one-minute window: long enough that no
// window boundary falls inside a test's few requests.
func perMinute(burst int) ratelimit.Rate {
	return ratelimit.Rate{PerSecond: float64(burst) / 60, Burst: burst}
}

func setupLimits(t *testing.T, limits RateLimits) *testBundle {
	t.Helper()
	// These tests count what Postgres decides: on a loaded machine a
	// decision may take longer than the default 250 ms, and the per-replica
	// fallback's own count would then answer instead (infra/ratelimit
	// tests the fallback).
	limits.Timeout = cmp.Or(limits.Timeout, time.Minute)
	return &testBundle{server: New(Options{
		Pool: dbtest.NewPool(t), Registry: prometheus.NewRegistry(), PublicAPI: true,
		JWTSecret: testSecret, BcryptCost: 4, RateLimits: limits,
	})}
}

// from sends a request as peer (the socket address) with extra headers.
func (b *testBundle) from(t *testing.T, peer string, header http.Header, method, path string, body any, token string) response {
	t.Helper()
	var raw string
	switch v := body.(type) {
	case nil:
	case string:
		raw = v
	default:
		buf, _ := json.Marshal(v)
		raw = string(buf)
	}
	req := httptest.NewRequest(method, path, strings.NewReader(raw))
	req.RemoteAddr = peer
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	b.server.ServeHTTP(rec, req)
	return recorded(rec)
}

// login sends an invalid login: answered 422 quickly, after the limit.
func (b *testBundle) login(t *testing.T, peer string, header http.Header) response {
	t.Helper()
	return b.from(t, peer, header, http.MethodPost, "/v1/auth/login", `{}`, "")
}

func requireTooMany(t *testing.T, res response, limit int) {
	t.Helper()
	requireProblem(t, res, http.StatusTooManyRequests)
	h := res.header
	if h.Get("X-RateLimit-Limit") != strconv.Itoa(limit) || h.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("rate limit headers: %v", h)
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After %q", h.Get("Retry-After"))
	}
	if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err != nil || reset < time.Now().Unix() {
		t.Fatalf("X-RateLimit-Reset %q", h.Get("X-RateLimit-Reset"))
	}
}

// exhaust spends key's burst and checks the next request is refused.
func exhaust(t *testing.T, burst int, send func() response) {
	t.Helper()
	for i := range burst {
		res := send()
		if res.status == http.StatusTooManyRequests || res.header.Get("X-RateLimit-Remaining") != strconv.Itoa(burst-1-i) {
			t.Fatalf("request %d of the burst: %d %v", i+1, res.status, res.header)
		}
	}
	requireTooMany(t, send(), burst)
}

func TestAuthRateLimit(t *testing.T) {
	t.Parallel()
	t.Run("defaults are docs/api.md's 5/s burst 8", func(t *testing.T) {
		t.Parallel()
		b := setupLimits(t, RateLimits{})
		res := b.login(t, "192.0.2.1:1000", nil)
		if res.status != http.StatusUnprocessableEntity || res.header.Get("X-RateLimit-Limit") != "8" || res.header.Get("X-RateLimit-Remaining") != "7" {
			t.Fatalf("%d %v", res.status, res.header)
		}
		if b.server.limits.auth.Window() != 1600*time.Millisecond {
			t.Fatalf("window %v", b.server.limits.auth.Window())
		}
	})
	b := setupLimits(t, RateLimits{Auth: perMinute(8), TrustedProxies: []string{"10.0.0.0/8"}})
	t.Run("burst then 429 problem with headers", func(t *testing.T) {
		t.Parallel()
		exhaust(t, 8, func() response { return b.login(t, "198.51.100.1:1000", nil) })
		res := b.from(t, "198.51.100.1:1001", nil, http.MethodPost, "/v1/auth/register", `{"email":"x@example.com","password":"12345678"}`, "")
		requireTooMany(t, res, 8)
		if !strings.Contains(res.body["detail"].(string), "too many requests from this address") {
			t.Fatalf("detail: %s", res.raw)
		}
	})
	t.Run("different addresses do not share", func(t *testing.T) {
		t.Parallel()
		exhaust(t, 8, func() response { return b.login(t, "198.51.100.2:1000", nil) })
		exhaust(t, 8, func() response { return b.login(t, "198.51.100.3:1000", nil) })
	})
	t.Run("spoofed X-Forwarded-For from an untrusted peer is ignored", func(t *testing.T) {
		t.Parallel()
		exhaust(t, 8, func() response { return b.login(t, "198.51.100.4:1000", nil) })
		requireTooMany(t, b.login(t, "198.51.100.4:1000", http.Header{"X-Forwarded-For": {"203.0.113.99"}}), 8)
	})
	t.Run("X-Forwarded-For from a trusted proxy is the key", func(t *testing.T) {
		t.Parallel()
		via := func(xff string) func() response {
			return func() response { return b.login(t, "10.0.0.1:1000", http.Header{"X-Forwarded-For": {xff}}) }
		}
		exhaust(t, 8, via("203.0.113.5"))
		exhaust(t, 8, via("203.0.113.6"))
		requireTooMany(t, via("1.2.3.4, 203.0.113.5, 10.0.0.7")(), 8) // right-most untrusted hop
	})
	t.Run("IPv6: per /64, and per /48 with four times the limit", func(t *testing.T) {
		t.Parallel()
		from := func(peer string) func() response { return func() response { return b.login(t, peer, nil) } }
		// One /64 spends its own limit; another address of it shares it.
		exhaust(t, 8, from("[2001:db8:1:1::1]:1000"))
		requireTooMany(t, b.login(t, "[2001:db8:1:1:ffff::2]:1000", nil), 8)
		// Three more /64s of the same /48 spend the rest of its 32...
		for _, net := range []string{"2", "3", "4"} {
			exhaust(t, 8, from("[2001:db8:1:"+net+"::1]:1000"))
		}
		// ... and a fifth /64, which has spent nothing, is refused by the /48.
		res := b.login(t, "[2001:db8:1:5::1]:1000", nil)
		requireTooMany(t, res, 32)
		// Another /48 is not.
		if res := b.login(t, "[2001:db8:2:1::1]:1000", nil); res.status == http.StatusTooManyRequests {
			t.Fatalf("another /48 refused: %v", res.header)
		}
		// IPv4 has no site count: another address is another client.
		if res := b.login(t, "198.51.100.77:1000", nil); res.status == http.StatusTooManyRequests {
			t.Fatalf("IPv4: %v", res.header)
		}
	})
	t.Run("health is not limited", func(t *testing.T) {
		t.Parallel()
		for range 12 {
			if res := b.from(t, "198.51.100.9:1", nil, http.MethodGet, "/healthz/live", nil, ""); res.status != http.StatusOK || res.header.Get("X-RateLimit-Limit") != "" {
				t.Fatalf("%d %v", res.status, res.header)
			}
		}
	})
}

func TestUserRateLimit(t *testing.T) {
	t.Parallel()
	b := setupLimits(t, RateLimits{Auth: generous, User: perMinute(3)})
	alice, _ := b.register(t, "alice@example.com")
	bob, _ := b.register(t, "bob@example.com")
	t.Run("per user, across addresses", func(t *testing.T) {
		t.Parallel()
		exhaust(t, 3, func() response { return b.from(t, "198.51.100.1:1", nil, http.MethodGet, "/v1/me", nil, alice) })
		res := b.from(t, "198.51.100.2:1", nil, http.MethodGet, "/v1/me", nil, alice)
		requireTooMany(t, res, 3)
		if !strings.Contains(res.body["detail"].(string), "for this account") {
			t.Fatalf("detail: %s", res.raw)
		}
		if res := b.from(t, "198.51.100.1:1", nil, http.MethodGet, "/v1/me", nil, bob); res.status != http.StatusOK {
			t.Fatalf("bob limited by alice: %d %s", res.status, res.raw)
		}
	})
	t.Run("unauthenticated requests are refused before counting", func(t *testing.T) {
		t.Parallel()
		for range 5 {
			requireProblem(t, b.from(t, "198.51.100.3:1", nil, http.MethodGet, "/v1/me", nil, ""), http.StatusUnauthorized)
		}
	})
}

func TestRateLimitsInOpenAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodGet, "/openapi.json", nil, "")
	paths := res.body["paths"].(map[string]any)
	for _, op := range []struct{ path, method string }{{"/v1/me", "get"}, {"/v1/auth/login", "post"}} {
		responses := paths[op.path].(map[string]any)[op.method].(map[string]any)["responses"].(map[string]any)
		if _, ok := responses["429"]; !ok {
			t.Errorf("%s %s: no 429 in the OpenAPI document", op.method, op.path)
		}
	}
	health := paths["/healthz/live"].(map[string]any)["get"].(map[string]any)["responses"].(map[string]any)
	if _, ok := health["429"]; ok {
		t.Error("health documents a 429")
	}
}
