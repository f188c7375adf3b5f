package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/freeport"
)

// While the database cannot be reached, requests that need it are
// answered 503 with Retry-After, not 500: signing in, a user token's
// account check, an API key's lookup, a read.
func TestDatabaseOutageAnswers503(t *testing.T) {
	t.Parallel()
	token, _ := setup(t).register(t, "outage@example.com") // a token signed with the same secret
	addr, err := freeport.Addr()                           // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), "postgres://switchboard@"+addr+"/switchboard?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	down := &testBundle{server: New(Options{
		Pool: pool, Registry: prometheus.NewRegistry(), PublicAPI: true, JWTSecret: testSecret, BcryptCost: 4,
		RateLimits: RateLimits{Auth: generous, User: generous},
	})}
	for _, c := range []struct {
		name, method, path string
		body               any
		token              string
	}{
		{"login", http.MethodPost, "/v1/auth/login", map[string]string{"email": "outage@example.com", "password": "correct horse"}, ""},
		{"register", http.MethodPost, "/v1/auth/register", map[string]string{"email": "new@example.com", "password": "correct horse"}, ""},
		{"a user token", http.MethodGet, "/v1/me", nil, token},
		{"an API key", http.MethodGet, "/v1/me", nil, "sbk_" + strings.Repeat("a", 43)},
	} {
		res := down.do(t, c.method, c.path, c.body, c.token)
		if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") == "" ||
			res.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d, Retry-After %q, %s: want 503 with Retry-After", c.name, res.status, res.header.Get("Retry-After"), res.raw)
		}
	}
}

// Readiness says why it fails without the database's coordinates: anyone
// may ask it.
func TestReadyReasonNamesNoCoordinates(t *testing.T) {
	t.Parallel()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), "postgres://secretuser@"+addr+"/secretdb?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	down := &testBundle{server: New(Options{Pool: pool, Registry: prometheus.NewRegistry(), PublicAPI: true, JWTSecret: testSecret})}
	res := down.do(t, http.MethodGet, "/healthz/ready", nil, "")
	reason, _ := res.body["reason"].(string)
	_, port, _ := strings.Cut(addr, ":")
	if res.status != http.StatusServiceUnavailable || !strings.HasPrefix(reason, "postgres: ") {
		t.Fatalf("ready: %d %s", res.status, res.raw)
	}
	for _, secret := range []string{"secretuser", "secretdb", "127.0.0.1", port} {
		if strings.Contains(string(res.raw), secret) {
			t.Errorf("readiness answers %q, naming %q", reason, secret)
		}
	}
}
