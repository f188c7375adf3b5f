package web

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// setupJobs is setup with what the task routes need: a River client for
// manual runs and the River UI.
func setupJobs(t *testing.T) *testBundle {
	t.Helper()
	return setupJobsLimits(t, RateLimits{})
}

// setupJobsLimits is setupJobs with other rate limits.
func setupJobsLimits(t *testing.T, limits RateLimits) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil), Logger: slog.New(slog.DiscardHandler), Prefix: "/riverui",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := ui.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s := New(Options{
		Pool: pool, Registry: prometheus.NewRegistry(), PublicAPI: true,
		JWTSecret: testSecret, BcryptCost: 4, RateLimits: limits,
		River: client, RiverUI: ui,
	})
	return &testBundle{server: s}
}

func webhookTask(name string) map[string]any {
	return map[string]any{
		"name": name, "schedule": "*/5 * * * *",
		"action": map[string]any{"type": "webhook", "url": "https://example.com/hook", "method": "POST", "headers": map[string]string{"X-Env": "test"}, "body": map[string]any{"n": 1}},
	}
}

// createTask posts a task and returns its JSON.
func (b *testBundle) createTask(t testing.TB, token string, body map[string]any) map[string]any {
	t.Helper()
	res := b.do(t, http.MethodPost, "/v1/tasks", body, token)
	if res.status != http.StatusCreated {
		t.Fatalf("create task: %d %s", res.status, res.raw)
	}
	return res.body
}

func TestTasksAPI(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)

	t.Run("create returns the task and its secret once", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "create@example.com")
		task := b.createTask(t, token, webhookTask("ping"))
		for field, want := range map[string]any{
			"name": "ping", "schedule": "*/5 * * * *", "timezone": "UTC", "active": true, "overlap": "skip",
			"max_attempts": 3.0, "timeout_seconds": 30.0, "run_count": 0.0, "last_run_at": nil,
		} {
			if task[field] != want {
				t.Errorf("%s = %v, want %v", field, task[field], want)
			}
		}
		if s, _ := task["signing_secret"].(string); !strings.HasPrefix(s, "whsec_") {
			t.Errorf("signing_secret = %v", task["signing_secret"])
		}
		next, err := time.Parse(time.RFC3339, task["next_run_at"].(string))
		if err != nil || next.Minute()%5 != 0 || !next.After(time.Now()) || time.Until(next) > 5*time.Minute {
			t.Errorf("next_run_at = %v (%v)", task["next_run_at"], err)
		}
		action := task["action"].(map[string]any)
		if action["type"] != "webhook" || action["url"] != "https://example.com/hook" || action["body"].(map[string]any)["n"] != 1.0 {
			t.Errorf("action = %v", action)
		}
		got := b.do(t, http.MethodGet, "/v1/tasks/"+task["id"].(string), nil, token)
		if got.status != 200 || got.body["name"] != "ping" {
			t.Fatalf("get: %d %s", got.status, got.raw)
		}
		if _, ok := got.body["signing_secret"]; ok {
			t.Fatal("signing_secret returned again after create")
		}
	})

	t.Run("bad input is 422 with a detail and changes nothing", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "bad@example.com")
		hook := func(url string) map[string]any { return map[string]any{"type": "webhook", "url": url} }
		for name, body := range map[string]map[string]any{
			"bad cron":          {"name": "x", "schedule": "every tuesday", "action": hook("https://example.com")},
			"every too short":   {"name": "x", "schedule": "@every 100ms", "action": hook("https://example.com")},
			"bad timezone":      {"name": "x", "schedule": "@hourly", "timezone": "Moon/Base", "action": hook("https://example.com")},
			"bad action type":   {"name": "x", "schedule": "@hourly", "action": map[string]any{"type": "email"}},
			"missing action":    {"name": "x", "schedule": "@hourly"},
			"loopback url":      {"name": "x", "schedule": "@hourly", "action": hook("http://127.0.0.1/x")},
			"metadata url":      {"name": "x", "schedule": "@hourly", "action": hook("http://169.254.169.254/")},
			"ipv6 loopback url": {"name": "x", "schedule": "@hourly", "action": hook("http://[::1]:9000/")},
			"not a url":         {"name": "x", "schedule": "@hourly", "action": hook("not a url")},
			"reserved event":    {"name": "x", "schedule": "@hourly", "action": map[string]any{"type": "publish", "event": "task.run.failed"}},
			"blank room":        {"name": "x", "schedule": "@hourly", "action": map[string]any{"type": "publish", "event": "report", "room": " "}},
			"control-byte room": {"name": "x", "schedule": "@hourly", "action": map[string]any{"type": "publish", "event": "report", "room": "a\x01b"}},
			"150-byte room":     {"name": "x", "schedule": "@hourly", "action": map[string]any{"type": "publish", "event": "report", "room": strings.Repeat("r", 150)}},
			"bad header name":   {"name": "x", "schedule": "@hourly", "action": map[string]any{"type": "webhook", "url": "https://example.com", "headers": map[string]string{"Xé": "1"}}},
			"control in header": {"name": "x", "schedule": "@hourly", "action": map[string]any{"type": "webhook", "url": "https://example.com", "headers": map[string]string{"X-A": "a\x01b"}}},
			"bad overlap":       {"name": "x", "schedule": "@hourly", "overlap": "queue", "action": hook("https://example.com")},
			"zero attempts":     {"name": "x", "schedule": "@hourly", "max_attempts": 0, "action": hook("https://example.com")},
			"unknown field":     {"name": "x", "schedule": "@hourly", "owner_id": "x", "action": hook("https://example.com")},
		} {
			res := b.do(t, http.MethodPost, "/v1/tasks", body, token)
			if res.status != http.StatusUnprocessableEntity {
				t.Errorf("%s: %d %s", name, res.status, res.raw)
				continue
			}
			requireProblem(t, res, http.StatusUnprocessableEntity)
		}
		res := b.do(t, http.MethodGet, "/v1/tasks", nil, token)
		if items := res.body["items"].([]any); len(items) != 0 {
			t.Fatalf("rejected tasks were stored: %s", res.raw)
		}
	})

	t.Run("list pages newest first", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "list@example.com")
		var want []string
		for i := range 5 {
			want = append([]string{b.createTask(t, token, webhookTask("t"+string(rune('a'+i))))["id"].(string)}, want...)
		}
		var got []string
		path := "/v1/tasks?limit=2"
		for pages := 0; ; pages++ {
			res := b.do(t, http.MethodGet, path, nil, token)
			if res.status != 200 || pages > 5 {
				t.Fatalf("list: %d %s", res.status, res.raw)
			}
			for _, it := range res.body["items"].([]any) {
				got = append(got, it.(map[string]any)["id"].(string))
			}
			next, _ := res.body["next_cursor"].(string)
			if next == "" {
				if _, ok := res.body["next_cursor"]; !ok {
					t.Fatal("next_cursor missing on the last page; want null")
				}
				break
			}
			path = "/v1/tasks?limit=2&cursor=" + next
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("got %v, want %v", got, want)
		}
		for _, q := range []string{"limit=0", "limit=101", "cursor=bogus"} {
			requireProblem(t, b.do(t, http.MethodGet, "/v1/tasks?"+q, nil, token), http.StatusUnprocessableEntity)
		}
	})

	t.Run("patch recomputes next_run_at", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "patch@example.com")
		id := b.createTask(t, token, webhookTask("p"))["id"].(string)
		res := b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"schedule": "0 0 9 * * *", "timezone": "Asia/Tokyo", "overlap": "allow"}, token)
		if res.status != 200 || res.body["overlap"] != "allow" || res.body["schedule"] != "0 0 9 * * *" {
			t.Fatalf("patch: %d %s", res.status, res.raw)
		}
		next, _ := time.Parse(time.RFC3339, res.body["next_run_at"].(string))
		if tokyo, _ := time.LoadLocation("Asia/Tokyo"); next.In(tokyo).Hour() != 9 {
			t.Fatalf("next_run_at %v is not 09:00 in Tokyo", next)
		}
		res = b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"active": false}, token)
		if res.status != 200 || res.body["next_run_at"] != nil {
			t.Fatalf("deactivate: %d %s", res.status, res.raw)
		}
		requireProblem(t, b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"schedule": "nope"}, token), http.StatusUnprocessableEntity)
		requireProblem(t, b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"action": map[string]any{"type": "webhook", "url": "http://10.0.0.1/"}}, token), http.StatusUnprocessableEntity)
		if got := b.do(t, http.MethodGet, "/v1/tasks/"+id, nil, token); got.body["schedule"] != "0 0 9 * * *" || got.body["action"].(map[string]any)["url"] != "https://example.com/hook" {
			t.Fatalf("a rejected patch changed the task: %s", got.raw)
		}
	})

	t.Run("delete", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "delete@example.com")
		id := b.createTask(t, token, webhookTask("d"))["id"].(string)
		if res := b.do(t, http.MethodDelete, "/v1/tasks/"+id, nil, token); res.status != http.StatusNoContent || len(res.raw) != 0 {
			t.Fatalf("delete: %d %s", res.status, res.raw)
		}
		requireProblem(t, b.do(t, http.MethodGet, "/v1/tasks/"+id, nil, token), http.StatusNotFound)
		requireProblem(t, b.do(t, http.MethodDelete, "/v1/tasks/"+id, nil, token), http.StatusNotFound)
	})

	t.Run("another user's task is 404 everywhere", func(t *testing.T) {
		t.Parallel()
		owner, _ := b.register(t, "owner@example.com")
		other, _ := b.register(t, "other@example.com")
		id := b.createTask(t, owner, webhookTask("mine"))["id"].(string)
		run := b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs", nil, owner)
		if run.status != http.StatusAccepted {
			t.Fatalf("trigger: %d %s", run.status, run.raw)
		}
		for _, r := range []struct{ method, path string }{
			{http.MethodGet, "/v1/tasks/" + id}, {http.MethodPatch, "/v1/tasks/" + id}, {http.MethodDelete, "/v1/tasks/" + id},
			{http.MethodPost, "/v1/tasks/" + id + "/runs"}, {http.MethodGet, "/v1/tasks/" + id + "/runs"},
			{http.MethodPost, "/v1/tasks/" + id + "/rotate-secret"},
			{http.MethodGet, "/v1/runs/" + run.body["id"].(string)}, // a malformed id is 422: ids_test.go
		} {
			var body any
			if r.method == http.MethodPatch {
				body = map[string]any{"name": "stolen"}
			}
			requireProblem(t, b.do(t, r.method, r.path, body, other), http.StatusNotFound)
		}
		if items := b.do(t, http.MethodGet, "/v1/tasks", nil, other).body["items"].([]any); len(items) != 0 {
			t.Fatalf("another user's list shows %d tasks", len(items))
		}
	})

	t.Run("authentication required", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{"/v1/tasks", "/v1/tasks/7d4f6a53-4f65-4b8e-9a57-6b3f1c1b1a11/runs", "/v1/runs/7d4f6a53-4f65-4b8e-9a57-6b3f1c1b1a11"} {
			requireProblem(t, b.do(t, http.MethodGet, p, nil, ""), http.StatusUnauthorized)
		}
	})

	t.Run("in the OpenAPI document", func(t *testing.T) {
		t.Parallel()
		paths := b.do(t, http.MethodGet, "/openapi.json", nil, "").body["paths"].(map[string]any)
		for _, p := range []string{"/v1/tasks", "/v1/tasks/{id}", "/v1/tasks/{id}/runs", "/v1/runs/{id}"} {
			if _, ok := paths[p]; !ok {
				t.Errorf("%s missing from the OpenAPI document", p)
			}
		}
	})
}

func TestRunsAPI(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)

	t.Run("manual trigger queues a run and its job", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "trigger@example.com")
		id := b.createTask(t, token, webhookTask("m"))["id"].(string)
		res := b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs", nil, token)
		if res.status != http.StatusAccepted || res.body["trigger"] != "manual" || res.body["status"] != "queued" || res.body["task_id"] != id {
			t.Fatalf("trigger: %d %s", res.status, res.raw)
		}
		for _, f := range []string{"id", "scheduled_for", "started_at", "finished_at", "attempt", "duration_ms", "http_status", "error", "response_excerpt"} {
			if _, ok := res.body[f]; !ok {
				t.Errorf("run has no %s: %s", f, res.raw)
			}
		}
		var jobs int
		if err := b.server.opts.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE args->>'run_id' = $1`, res.body["id"]).Scan(&jobs); err != nil || jobs != 1 {
			t.Fatalf("river jobs for the run: %d %v", jobs, err)
		}
		got := b.do(t, http.MethodGet, "/v1/runs/"+res.body["id"].(string), nil, token)
		if got.status != 200 || got.body["id"] != res.body["id"] {
			t.Fatalf("get run: %d %s", got.status, got.raw)
		}
	})

	t.Run("overlap skip answers 409 while a run is active; allow does not", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "overlap@example.com")
		id := b.createTask(t, token, webhookTask("o"))["id"].(string)
		if res := b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs", nil, token); res.status != http.StatusAccepted {
			t.Fatalf("first trigger: %d", res.status)
		}
		requireProblem(t, b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs", nil, token), http.StatusConflict)
		b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"overlap": "allow"}, token)
		if res := b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs", nil, token); res.status != http.StatusAccepted {
			t.Fatalf("trigger with overlap allow: %d %s", res.status, res.raw)
		}
		runs := b.do(t, http.MethodGet, "/v1/tasks/"+id+"/runs", nil, token)
		if items := runs.body["items"].([]any); len(items) != 2 || runs.body["next_cursor"] != nil {
			t.Fatalf("runs: %s", runs.raw)
		}
	})

	t.Run("runs page newest first", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "history@example.com")
		body := webhookTask("h")
		body["overlap"] = "allow"
		id := b.createTask(t, token, body)["id"].(string)
		var want []string
		for range 3 {
			want = append([]string{b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs", nil, token).body["id"].(string)}, want...)
		}
		first := b.do(t, http.MethodGet, "/v1/tasks/"+id+"/runs?limit=2", nil, token)
		next, _ := first.body["next_cursor"].(string)
		second := b.do(t, http.MethodGet, "/v1/tasks/"+id+"/runs?limit=2&cursor="+next, nil, token)
		var got []string
		for _, it := range append(first.body["items"].([]any), second.body["items"].([]any)...) {
			got = append(got, it.(map[string]any)["id"].(string))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") || second.body["next_cursor"] != nil {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}
