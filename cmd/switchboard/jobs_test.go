package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// TestTasksRunAcrossRoles: a task created on a web-only replica is claimed
// and run by a worker-only replica; a manual run enqueued by the web-only
// replica (InsertTx on its insert-only River client) runs there too.
func TestTasksRunAcrossRoles(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	var calls atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	defer hook.Close()

	webCfg := testConfig(t, dbURL)
	webCfg.Roles = []string{config.RoleWeb}
	workerCfg := testConfig(t, dbURL)
	workerCfg.Roles = []string{config.RoleWorker}
	workerCfg.WebhookPrivate = true
	webCfg.WebhookPrivate = true
	web := startServer(t, webCfg)
	worker := startServer(t, workerCfg)

	token, _ := registerUser(t, web, "cron@example.com")
	status, task := call(t, http.MethodPost, web.URL+"/v1/tasks", map[string]any{
		"name": "every second", "schedule": "@every 1s",
		"action": map[string]any{"type": "webhook", "url": hook.URL + "/tick"},
	}, token)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, task)
	}
	id := task["id"].(string)
	testwait.For(t, 15*time.Second, "two scheduled runs to succeed", func() bool {
		_, runs := call(t, http.MethodGet, web.URL+"/v1/tasks/"+id+"/runs", nil, token)
		ok := 0
		for _, r := range runs["items"].([]any) {
			if r.(map[string]any)["status"] == "succeeded" && r.(map[string]any)["trigger"] == "schedule" {
				ok++
			}
		}
		return ok >= 2
	})

	status, _ = call(t, http.MethodPatch, web.URL+"/v1/tasks/"+id, map[string]any{"active": false}, token)
	if status != http.StatusOK {
		t.Fatalf("pause: %d", status)
	}
	status, run := call(t, http.MethodPost, web.URL+"/v1/tasks/"+id+"/runs", nil, token)
	if status != http.StatusAccepted {
		t.Fatalf("manual run: %d %v", status, run)
	}
	testwait.For(t, 15*time.Second, "the manual run to succeed", func() bool {
		_, r := call(t, http.MethodGet, web.URL+"/v1/runs/"+run["id"].(string), nil, token)
		return r["status"] == "succeeded"
	})

	res, err := http.Get(worker.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, m := range []string{
		`switchboard_task_runs_total{status="succeeded"}`, "switchboard_claim_batch_size_bucket",
		"switchboard_task_due_lag_seconds_bucket", "switchboard_tasks_due ", "switchboard_task_ticks_skipped_total",
	} {
		if !strings.Contains(string(body), m) {
			t.Errorf("worker metrics lack %s", m)
		}
	}
	if calls.Load() < 3 {
		t.Fatalf("the webhook was called %d times", calls.Load())
	}
}

func TestRiverUIForAdmins(t *testing.T) {
	t.Parallel()
	srv := startServer(t, testConfig(t, dbtest.NewDatabaseURL(t)))
	registerUser(t, srv, "ops@example.com")
	runAdmin(t, srv, "grant", "ops@example.com")
	userToken, _ := registerUser(t, srv, "user@example.com")

	get := func(path string, prepare func(*http.Request)) int {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		prepare(req)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if s := get("/riverui/", func(*http.Request) {}); s != http.StatusUnauthorized {
		t.Fatalf("anonymous: %d", s)
	}
	if s := get("/riverui/", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+userToken) }); s != http.StatusForbidden {
		t.Fatalf("user: %d", s)
	}
	if s := get("/riverui/api/jobs?state=available", func(r *http.Request) { r.SetBasicAuth("ops@example.com", "correct horse") }); s != http.StatusOK {
		t.Fatalf("admin by basic auth: %d", s)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/auth/login", strings.NewReader(`{"email":"ops@example.com","password":"correct horse"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if len(res.Cookies()) != 1 {
		t.Fatalf("admin login cookies: %v", res.Cookies())
	}
	if s := get("/riverui/", func(r *http.Request) { r.AddCookie(res.Cookies()[0]) }); s != http.StatusOK {
		t.Fatalf("admin by cookie: %d", s)
	}
}

// TestRunEventsReachTheOwnersSocket: a manual run triggered on a web-only
// replica and performed on a worker-only one; its status changes and the
// publish action's own event reach the owner's socket on the web replica.
func TestRunEventsReachTheOwnersSocket(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	webCfg, workerCfg := testConfig(t, dbURL), testConfig(t, dbURL)
	webCfg.Roles, workerCfg.Roles = []string{config.RoleWeb}, []string{config.RoleWorker}
	web := startServer(t, webCfg)
	startServer(t, workerCfg)

	token, owner := registerUser(t, web, "events@example.com")
	s := connect(t, web, token)
	connected(t, web, owner, 1)
	status, task := call(t, http.MethodPost, web.URL+"/v1/tasks", map[string]any{
		"name": "report", "schedule": "@daily",
		"action": map[string]any{"type": "publish", "event": "report.ready", "payload": map[string]any{"rows": 3}},
	}, token)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, task)
	}
	status, run := call(t, http.MethodPost, web.URL+"/v1/tasks/"+task["id"].(string)+"/runs", nil, token)
	if status != http.StatusAccepted {
		t.Fatalf("trigger: %d %v", status, run)
	}
	seen := map[string]string{}
	for len(seen) < 4 {
		select {
		case f := <-s.frames:
			seen[f.Event] = string(f.Payload)
		case <-time.After(15 * time.Second):
			t.Fatalf("events so far: %v", seen)
		}
	}
	for _, ev := range []string{"task.run.queued", "task.run.running", "task.run.succeeded"} {
		if p := seen[ev]; !strings.Contains(p, `"id":"`+run["id"].(string)+`"`) || !strings.Contains(p, `"status":"`+strings.TrimPrefix(ev, "task.run.")+`"`) {
			t.Errorf("%s payload: %s", ev, p)
		}
	}
	if seen["report.ready"] != `{"rows": 3}` && seen["report.ready"] != `{"rows":3}` {
		t.Errorf("report.ready payload: %q", seen["report.ready"])
	}
}
