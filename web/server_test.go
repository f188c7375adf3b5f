package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2/humatest"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/ratelimit"
	"github.com/switchboard/switchboard/infra/testkit/browsertest"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) {
	dbtest.Main(m, migrations.Hash(), migrations.Migrate, browsertest.Close)
}

var testSecret = []byte("test-secret-test-secret-test-secret")

var generous = ratelimit.Rate{PerSecond: 1000, Burst: 1000}

type testBundle struct {
	server *Server
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	s := New(Options{
		Pool: dbtest.NewPool(t), Registry: prometheus.NewRegistry(), PublicAPI: true,
		JWTSecret: testSecret, BcryptCost: 4,
		// Every request of these tests comes from one address: limits are
		// tested in ratelimit_test.go.
		RateLimits: RateLimits{Auth: generous, User: generous},
	})
	return &testBundle{server: s}
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// api drives the server's Huma API through humatest: requests go through
// the whole handler chain (chi middleware, rate limits, auth) and are
// logged on t.
func (b *testBundle) api(t testing.TB) humatest.TestAPI {
	t.Helper()
	return humatest.Wrap(t, b.server.API())
}

// do sends a request through the full handler chain. A string or []byte
// body is sent as it is, as JSON; anything else is encoded.
func (b *testBundle) do(t testing.TB, method, path string, body any, token string) response {
	t.Helper()
	var args []any
	switch v := body.(type) {
	case nil:
	case string:
		args = append(args, strings.NewReader(v), "Content-Type: application/json")
	case []byte:
		args = append(args, bytes.NewReader(v), "Content-Type: application/json")
	default:
		args = append(args, v)
	}
	if token != "" {
		args = append(args, "Authorization: Bearer "+token)
	}
	return recorded(b.api(t).Do(method, path, args...))
}

func recorded(rec *httptest.ResponseRecorder) response {
	res := response{status: rec.Code, header: rec.Header(), raw: rec.Body.Bytes()}
	_ = json.Unmarshal(res.raw, &res.body)
	return res
}

// register creates an account and returns its token and user id.
func (b *testBundle) register(t testing.TB, email string) (token, id string) {
	t.Helper()
	res := b.do(t, http.MethodPost, "/v1/auth/register", map[string]string{"email": email, "password": "correct horse"}, "")
	if res.status != http.StatusCreated {
		t.Fatalf("register %s: %d %s", email, res.status, res.raw)
	}
	return res.body["token"].(string), res.body["user"].(map[string]any)["id"].(string)
}

// registerAdmin creates an account and grants it the admin role the way an
// operator does (switchboard admin grant).
func (b *testBundle) registerAdmin(t *testing.T, email string) (token, id string) {
	t.Helper()
	token, id = b.register(t, email)
	role := accounts.RoleAdmin
	if _, err := accounts.UpdateUserByEmail(context.Background(), b.server.opts.Pool, email, accounts.UserChange{Role: &role}); err != nil {
		t.Fatalf("grant admin to %s: %v", email, err)
	}
	return token, id
}

func requireProblem(t *testing.T, res response, status int) {
	t.Helper()
	if res.status != status {
		t.Fatalf("status = %d, want %d: %s", res.status, status, res.raw)
	}
	if ct := res.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type = %q, want application/problem+json", ct)
	}
	if d, _ := res.body["detail"].(string); d == "" {
		t.Fatalf("problem has no detail: %s", res.raw)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("live", func(t *testing.T) {
		t.Parallel()
		res := b.do(t, http.MethodGet, "/healthz/live", nil, "")
		if res.status != 200 || res.body["status"] != "ok" || len(res.body) != 1 {
			t.Fatalf("live: %d %s", res.status, res.raw)
		}
	})
	t.Run("ready", func(t *testing.T) {
		t.Parallel()
		res := b.do(t, http.MethodGet, "/healthz/ready", nil, "")
		if res.status != 200 || res.body["status"] != "ok" {
			t.Fatalf("ready: %d %s", res.status, res.raw)
		}
	})
}

func TestReadyFailsWithoutPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.server.opts.Pool.Close()
	res := b.do(t, http.MethodGet, "/healthz/ready", nil, "")
	if res.status != http.StatusServiceUnavailable || res.body["status"] != "unavailable" || !strings.HasPrefix(res.body["reason"].(string), "postgres:") {
		t.Fatalf("ready with a closed pool: %d %s", res.status, res.raw)
	}
}

func TestReadyGauge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(t, http.MethodGet, "/metrics", nil, ""); !bytes.Contains(res.raw, []byte("\nswitchboard_ready 1\n")) {
		t.Fatalf("switchboard_ready is not 1 on a ready replica:\n%s", res.raw)
	}
	b.server.opts.Pool.Close()
	if res := b.do(t, http.MethodGet, "/metrics", nil, ""); !bytes.Contains(res.raw, []byte("\nswitchboard_ready 0\n")) {
		t.Fatalf("switchboard_ready is not 0 without Postgres:\n%s", res.raw)
	}
}

func TestOpenAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodGet, "/openapi.json", nil, "")
	if res.status != 200 || res.body["openapi"] != "3.1.0" {
		t.Fatalf("openapi.json: %d", res.status)
	}
	paths := res.body["paths"].(map[string]any)
	for _, p := range []string{"/healthz/live", "/healthz/ready", "/v1/auth/register", "/v1/auth/login", "/v1/me"} {
		if _, ok := paths[p]; !ok {
			t.Errorf("%s missing from the OpenAPI document", p)
		}
	}
	for _, p := range []string{"/openapi.yaml", "/docs"} {
		if res := b.do(t, http.MethodGet, p, nil, ""); res.status != 200 {
			t.Errorf("%s: %d", p, res.status)
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.do(t, http.MethodGet, "/healthz/live", nil, "")
	res := b.do(t, http.MethodGet, "/metrics", nil, "")
	if !bytes.Contains(res.raw, []byte(`switchboard_http_request_duration_seconds_count{method="GET",route="/healthz/live",status="200"} 1`)) {
		t.Fatalf("request metric missing:\n%s", res.raw)
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, http.MethodGet, "/healthz/live", nil, "")
	if len(res.header.Get("X-Request-ID")) != 16 {
		t.Fatalf("no request id: %v", res.header)
	}
}
