package web

import (
	"context"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// requireQuota checks a quota refusal: the status, a problem+json naming
// the quota, its limit and the use, and for 429 a Retry-After.
func requireQuota(t *testing.T, res response, status int, name string, limit, used int) {
	t.Helper()
	requireProblem(t, res, status)
	if res.body["quota"] != name || res.body["limit"] != float64(limit) || res.body["used"] != float64(used) {
		t.Fatalf("problem %s, want quota %s, limit %d, used %d", res.raw, name, limit, used)
	}
	if status == http.StatusTooManyRequests && res.header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", res.header)
	}
}

// TestTaskQuota: a project's task past its quota is 409 naming the quota,
// and is not stored; another project is not affected.
func TestTaskQuota(t *testing.T) {
	t.Parallel()
	b := &testBundle{server: New(Options{
		Pool: dbtest.NewPool(t), Registry: prometheus.NewRegistry(), PublicAPI: true,
		JWTSecret: testSecret, BcryptCost: 4, RateLimits: RateLimits{Auth: generous, User: generous},
		Quotas: quota.Limits{Tasks: 2},
	})}
	token, _ := b.register(t, "task-quota@example.com")
	task := map[string]any{"name": "t", "action": map[string]any{"type": "publish", "event": "e"}}
	b.createTask(t, token, task)
	b.createTask(t, token, task)
	res := b.do(t, http.MethodPost, "/v1/tasks", task, token)
	requireQuota(t, res, http.StatusConflict, "tasks", 2, 2)
	var n int
	if err := b.server.opts.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tasks`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d tasks stored (%v), want 2", n, err)
	}
	other, _ := b.register(t, "task-quota-other@example.com")
	b.createTask(t, other, task)
}
