package web

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

func corsServer(t *testing.T, origins ...string) *Server {
	t.Helper()
	return New(Options{
		Pool: dbtest.NewPool(t), Registry: prometheus.NewRegistry(), PublicAPI: true,
		JWTSecret: testSecret, BcryptCost: 4, RateLimits: RateLimits{Auth: generous, User: generous},
		AllowedOrigins: origins, RiverUI: http.NotFoundHandler(),
	})
}

func corsRequest(s *Server, method, path, origin string, preflight bool) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	req.Header.Set("Origin", origin)
	if preflight {
		req.Method = http.MethodOptions
		req.Header.Set("Access-Control-Request-Method", method)
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,idempotency-key")
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

func TestCORS(t *testing.T) {
	t.Parallel()
	listed := corsServer(t, "https://app.example.com/")
	star := corsServer(t, "*", "https://app.example.com")
	none := corsServer(t)

	t.Run("a listed origin: preflight 204, credentials", func(t *testing.T) {
		t.Parallel()
		for _, s := range []*Server{listed, star} {
			rec := corsRequest(s, http.MethodPost, "/v1/tasks", "https://APP.example.com", true)
			h := rec.Header()
			if rec.Code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://APP.example.com" ||
				h.Get("Access-Control-Allow-Credentials") != "true" || h.Get("Access-Control-Allow-Methods") != "POST" ||
				h.Get("Access-Control-Allow-Headers") != "Authorization, Content-Type, Idempotency-Key" || h.Get("Access-Control-Max-Age") != "600" {
				t.Fatalf("preflight: %d %v", rec.Code, h)
			}
			rec = corsRequest(s, http.MethodGet, "/v1/me", "https://app.example.com", false)
			if rec.Code != http.StatusUnauthorized || rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
				rec.Header().Get("Access-Control-Expose-Headers") == "" {
				t.Fatalf("request: %d %v", rec.Code, rec.Header())
			}
		}
	})

	t.Run("a browser's trace context headers are allowed", func(t *testing.T) {
		t.Parallel()
		req := httptest.NewRequest(http.MethodOptions, "/v1/tasks", nil)
		req.Header.Set("Origin", "https://app.example.com")
		req.Header.Set("Access-Control-Request-Method", http.MethodPost)
		req.Header.Set("Access-Control-Request-Headers", "authorization,traceparent,tracestate")
		rec := httptest.NewRecorder()
		listed.ServeHTTP(rec, req)
		if got := rec.Header().Get("Access-Control-Allow-Headers"); rec.Code != http.StatusNoContent || got != "Authorization, Traceparent, Tracestate" {
			t.Fatalf("preflight with traceparent: %d, Access-Control-Allow-Headers %q", rec.Code, got)
		}
	})

	t.Run("* allows any origin, never with credentials", func(t *testing.T) {
		t.Parallel()
		for _, preflight := range []bool{true, false} {
			rec := corsRequest(star, http.MethodGet, "/v1/me", "https://other.example", preflight)
			if rec.Header().Get("Access-Control-Allow-Origin") != "*" || rec.Header().Get("Access-Control-Allow-Credentials") != "" {
				t.Fatalf("preflight %v: %d %v", preflight, rec.Code, rec.Header())
			}
		}
	})

	t.Run("an unlisted origin gets no CORS headers", func(t *testing.T) {
		t.Parallel()
		for _, s := range []*Server{listed, none} {
			rec := corsRequest(s, http.MethodPost, "/v1/tasks", "https://evil.example", true)
			if rec.Code != http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Origin") != "" || rec.Header().Get("Access-Control-Allow-Methods") != "" {
				t.Fatalf("preflight: %d %v", rec.Code, rec.Header())
			}
			rec = corsRequest(s, http.MethodGet, "/v1/me", "https://evil.example", false)
			if rec.Header().Get("Access-Control-Allow-Origin") != "" {
				t.Fatalf("request: %v", rec.Header())
			}
		}
	})

	t.Run("not on the River UI, internal routes or metrics", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/riverui/api/jobs", "/internal/v1/status", "/metrics"} {
			for _, preflight := range []bool{true, false} {
				rec := corsRequest(star, http.MethodGet, path, "https://app.example.com", preflight)
				if rec.Header().Get("Access-Control-Allow-Origin") != "" {
					t.Fatalf("%s preflight %v: %v", path, preflight, rec.Header())
				}
			}
		}
	})
}
