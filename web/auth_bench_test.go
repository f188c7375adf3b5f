package web

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/ratelimit"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// BenchmarkAuthenticatedRequest is the cost of a request with a user
// token: verify the token, the user limit, the per-request account read
// (checkAccount) and GET /v1/me's own read. It shows whether the checks a
// token goes through grow the request path. Run:
//
//	go test -run '^$' -bench AuthenticatedRequest -benchtime 2000x -count 5 ./web/
func BenchmarkAuthenticatedRequest(b *testing.B) {
	unlimited := ratelimit.Rate{PerSecond: 1 << 30, Burst: 1 << 30}
	bundle := &testBundle{server: New(Options{
		Pool: dbtest.NewPool(b), Registry: prometheus.NewRegistry(), PublicAPI: true,
		JWTSecret: testSecret, BcryptCost: 4, RateLimits: RateLimits{Auth: unlimited, User: unlimited},
	})}
	token, _ := bundle.register(b, "bench@example.com")
	req := httptest.NewRequest(http.MethodGet, "/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	for b.Loop() {
		rec := httptest.NewRecorder()
		bundle.server.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET /v1/me: %d %s", rec.Code, rec.Body)
		}
	}
}
