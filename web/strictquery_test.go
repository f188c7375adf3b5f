package web

import (
	"net/http"
	"strings"
	"testing"
)

// TestUnknownQueryParametersAre422: a misspelt filter is refused, naming
// the parameter and what the route takes, instead of being ignored.
func TestUnknownQueryParametersAre422(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token, _ := b.register(t, "query@example.com")
	for _, path := range []string{"/v1/runs?task_id=x", "/v1/tasks?limit=5&Limit=5", "/v1/me?verbose=1", "/healthz/live?x"} {
		res := b.do(t, http.MethodGet, path, nil, token)
		requireProblem(t, res, http.StatusUnprocessableEntity)
		if d := res.body["detail"].(string); !strings.Contains(d, "unknown query parameter") {
			t.Errorf("%s: %s", path, d)
		}
	}
	res := b.do(t, http.MethodGet, "/v1/runs?task_id=x", nil, token)
	if d := res.body["detail"].(string); !strings.Contains(d, "cursor") || !strings.Contains(d, "limit") {
		t.Errorf("the detail names what the route takes: %s", d)
	}
	// Declared parameters are as before.
	if res := b.do(t, http.MethodGet, "/v1/tasks?limit=5", nil, token); res.status != http.StatusOK {
		t.Fatalf("declared parameter: %d %s", res.status, res.raw)
	}
	// Unauthenticated: still 401 first.
	if res := b.do(t, http.MethodGet, "/v1/runs?task_id=x", nil, ""); res.status != http.StatusUnauthorized {
		t.Fatalf("without a token: %d %s", res.status, res.raw)
	}
}
