package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// TestZeroWorkersLoseNothing is a worker pool scaled to zero: with only a
// web replica, a due tick and a triggered run wait (and show in the scaler's
// figures, in the status and in /metrics); when a worker starts it claims
// the tick under the catch-up rules (the missed ticks fold into one run) and
// runs both.
func TestZeroWorkersLoseNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	var calls atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	defer hook.Close()
	webCfg := testConfig(t, dbURL)
	webCfg.Roles, webCfg.WebhookPrivate = []string{config.RoleWeb}, true
	web := startServer(t, webCfg)
	token, _ := registerUser(t, web, "ops@example.com")
	runAdmin(t, web, "grant", "ops@example.com")

	status, task := call(t, http.MethodPost, web.URL+"/v1/tasks", map[string]any{
		"name": "hourly", "schedule": "@every 1h",
		"action": map[string]any{"type": "webhook", "url": hook.URL + "/tick"},
	}, token)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, task)
	}
	id := task["id"].(string)
	// Its tick came due 2.5 hours ago: three ticks passed with no worker.
	due := time.Now().Add(-150 * time.Minute).Truncate(time.Second)
	if _, err := web.pool.Exec(ctx, `UPDATE tasks SET next_run_at = $2 WHERE id = $1`, id, due); err != nil {
		t.Fatal(err)
	}
	// A run triggered on another (on-demand) task: with the overdue task's default
	// overlap policy (skip), a queued run of its own would make its tick skip.
	status, onDemand := call(t, http.MethodPost, web.URL+"/v1/tasks", map[string]any{
		"name": "on demand", "action": map[string]any{"type": "webhook", "url": hook.URL + "/run"},
	}, token)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, onDemand)
	}
	status, manual := call(t, http.MethodPost, web.URL+"/v1/tasks/"+onDemand["id"].(string)+"/runs", nil, token)
	if status != http.StatusAccepted {
		t.Fatalf("trigger: %d %v", status, manual)
	}

	// The scaler sees the work: one due tick + one queued job, nothing running.
	testwait.For(t, 10*time.Second, "the backlog to show the due tick and the queued run", func() bool {
		_, st := call(t, http.MethodGet, web.URL+"/v1/cluster/status", nil, token)
		b, _ := st["backlog"].(map[string]any)
		return b["demand"] == 2.0 && b["due_tasks"] == 1.0 && b["available_jobs"] == 1.0 && b["running_jobs"] == 0.0 &&
			b["oldest_due_age_ms"].(float64) >= float64(150*time.Minute/time.Millisecond)
	})
	if got := metric(t, web, "switchboard_backlog_demand", ""); got != 2 {
		t.Fatalf("web replica's switchboard_backlog_demand = %v, want 2", got)
	}
	if _, r := call(t, http.MethodGet, web.URL+"/v1/runs/"+manual["id"].(string), nil, token); r["status"] != "queued" {
		t.Fatalf("with no worker the triggered run is %v, want queued", r["status"])
	}

	workerCfg := testConfig(t, dbURL)
	workerCfg.Roles, workerCfg.WebhookPrivate = []string{config.RoleWorker}, true
	startServer(t, workerCfg)
	var scheduled []any
	testwait.For(t, 30*time.Second, "the tick and the triggered run to succeed on the new worker", func() bool {
		_, runs := call(t, http.MethodGet, web.URL+"/v1/tasks/"+id+"/runs", nil, token)
		scheduled = runs["items"].([]any)
		_, r := call(t, http.MethodGet, web.URL+"/v1/runs/"+manual["id"].(string), nil, token)
		return len(scheduled) > 0 && scheduled[0].(map[string]any)["status"] == "succeeded" && r["status"] == "succeeded"
	})
	// Catch-up: the oldest missed tick runs, the two after it are folded in.
	run := scheduled[0].(map[string]any)
	if len(scheduled) != 1 || run["trigger"] != "schedule" || run["scheduled_for"] != due.UTC().Format(time.RFC3339) || run["skipped_ticks"] != 2.0 {
		t.Fatalf("scheduled runs %v, want one for %v with 2 skipped ticks", scheduled, due.UTC())
	}
	if calls.Load() != 2 {
		t.Fatalf("the webhook was called %d times, want 2", calls.Load())
	}
	testwait.For(t, 10*time.Second, "the backlog to drain", func() bool {
		_, st := call(t, http.MethodGet, web.URL+"/v1/cluster/status", nil, token)
		b, _ := st["backlog"].(map[string]any)
		return b["demand"] == 0.0
	})
}
