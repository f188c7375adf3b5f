package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func onDemandTask(name string) map[string]any {
	return map[string]any{"name": name, "action": map[string]any{"type": "webhook", "url": "https://example.com/hook"}}
}

func TestOnDemandTasks(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)

	t.Run("a task without a schedule is on-demand and never due", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "od-create@example.com")
		for _, body := range []map[string]any{onDemandTask("omitted"), func() map[string]any {
			m := onDemandTask("null")
			m["schedule"] = nil
			return m
		}()} {
			task := b.createTask(t, token, body)
			if task["schedule"] != nil || task["next_run_at"] != nil || task["active"] != true {
				t.Fatalf("on-demand task: %v", task)
			}
			if res := b.do(t, http.MethodPost, "/v1/tasks/"+task["id"].(string)+"/runs", nil, token); res.status != http.StatusAccepted {
				t.Fatalf("trigger an on-demand task: %d %s", res.status, res.raw)
			}
		}
		body := onDemandTask("empty")
		body["schedule"] = ""
		requireProblem(t, b.do(t, http.MethodPost, "/v1/tasks", body, token), http.StatusUnprocessableEntity)
	})

	t.Run("patch turns a scheduled task on-demand and back", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "od-patch@example.com")
		id := b.createTask(t, token, webhookTask("s"))["id"].(string)
		res := b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"schedule": nil}, token)
		if res.status != http.StatusOK || res.body["schedule"] != nil || res.body["next_run_at"] != nil {
			t.Fatalf("to on-demand: %d %s", res.status, res.raw)
		}
		res = b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"name": "renamed"}, token)
		if res.status != http.StatusOK || res.body["schedule"] != nil {
			t.Fatalf("an absent schedule must stay null: %d %s", res.status, res.raw)
		}
		res = b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"schedule": "@hourly"}, token)
		if res.status != http.StatusOK || res.body["schedule"] != "@hourly" || res.body["next_run_at"] == nil {
			t.Fatalf("back to scheduled: %d %s", res.status, res.raw)
		}
	})

	t.Run("list filters by kind", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "od-list@example.com")
		sched := b.createTask(t, token, webhookTask("s"))["id"]
		od := b.createTask(t, token, onDemandTask("o"))["id"]
		for query, want := range map[string][]any{"": {od, sched}, "?kind=scheduled": {sched}, "?kind=on_demand": {od}} {
			res := b.do(t, http.MethodGet, "/v1/tasks"+query, nil, token)
			items, _ := res.body["items"].([]any)
			if len(items) != len(want) {
				t.Fatalf("%q: %s", query, res.raw)
			}
			for i, it := range items {
				if it.(map[string]any)["id"] != want[i] {
					t.Fatalf("%q: item %d is %v, want %v", query, i, it, want[i])
				}
			}
		}
		requireProblem(t, b.do(t, http.MethodGet, "/v1/tasks?kind=cron", nil, token), http.StatusUnprocessableEntity)
	})
}

func TestTriggerInput(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)
	token, _ := b.register(t, "trigger-input@example.com")
	body := onDemandTask("in")
	body["overlap"] = "allow"
	id := b.createTask(t, token, body)["id"].(string)
	runs := "/v1/tasks/" + id + "/runs"

	t.Run("payload and run_at are kept on the run", func(t *testing.T) {
		t.Parallel()
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		res := b.do(t, http.MethodPost, runs, map[string]any{"payload": map[string]any{"order": 42}, "run_at": at}, token)
		if res.status != http.StatusAccepted || res.body["status"] != "queued" {
			t.Fatalf("trigger: %d %s", res.status, res.raw)
		}
		if p, _ := json.Marshal(res.body["payload"]); string(p) != `{"order":42}` {
			t.Fatalf("payload %s", p)
		}
		if got, _ := time.Parse(time.RFC3339Nano, res.body["scheduled_for"].(string)); !got.Equal(at) {
			t.Fatalf("scheduled_for %v, want %v", res.body["scheduled_for"], at)
		}
		var state string
		var scheduledAt time.Time
		err := b.server.opts.Pool.QueryRow(context.Background(), `SELECT state, scheduled_at FROM river_job WHERE args->>'run_id' = $1`, res.body["id"]).Scan(&state, &scheduledAt)
		if err != nil || !scheduledAt.Equal(at) || state != "scheduled" {
			t.Fatalf("river job: %s at %v, %v", state, scheduledAt, err)
		}
	})

	t.Run("an empty body still triggers", func(t *testing.T) {
		t.Parallel()
		if res := b.do(t, http.MethodPost, runs, "{}", token); res.status != http.StatusAccepted || res.body["payload"] != nil {
			t.Fatalf("trigger: %d %s", res.status, res.raw)
		}
	})

	t.Run("a key answers its first run", func(t *testing.T) {
		t.Parallel()
		first := b.do(t, http.MethodPost, runs, map[string]any{"idempotency_key": "order-7"}, token)
		again := b.do(t, http.MethodPost, runs, map[string]any{"idempotency_key": "order-7", "payload": 1}, token)
		other := b.do(t, http.MethodPost, runs, map[string]any{"idempotency_key": "order-8"}, token)
		if first.status != http.StatusAccepted || again.status != http.StatusOK || first.body["id"] != again.body["id"] {
			t.Fatalf("first %d %v, again %d %v", first.status, first.body["id"], again.status, again.body["id"])
		}
		if other.status != http.StatusAccepted || other.body["id"] == first.body["id"] {
			t.Fatalf("another key: %d %s", other.status, other.raw)
		}
		// The same key on another task is another key.
		id2 := b.createTask(t, token, onDemandTask("in2"))["id"].(string)
		if res := b.do(t, http.MethodPost, "/v1/tasks/"+id2+"/runs", map[string]any{"idempotency_key": "order-7"}, token); res.status != http.StatusAccepted {
			t.Fatalf("same key, other task: %d %s", res.status, res.raw)
		}
		// After 24 h the key makes a new run.
		if _, err := b.server.opts.Pool.Exec(context.Background(), `UPDATE task_run_keys SET created_at = now() - interval '25 hours' WHERE key = 'order-7' AND task_id = $1`, id); err != nil {
			t.Fatal(err)
		}
		later := b.do(t, http.MethodPost, runs, map[string]any{"idempotency_key": "order-7"}, token)
		if later.status != http.StatusAccepted || later.body["id"] == first.body["id"] {
			t.Fatalf("expired key: %d %s", later.status, later.raw)
		}
	})

	t.Run("bad input is 422", func(t *testing.T) {
		t.Parallel()
		for name, body := range map[string]any{
			"run_at in the past":   map[string]any{"run_at": time.Now().Add(-time.Hour)},
			"run_at too far":       map[string]any{"run_at": time.Now().Add(31 * 24 * time.Hour)},
			"run_at not a time":    `{"run_at":"tomorrow"}`,
			"key too long":         map[string]any{"idempotency_key": strings.Repeat("k", 256)},
			"key with a control":   map[string]any{"idempotency_key": "a\u0007b"},
			"a retry's key":        map[string]any{"idempotency_key": "retry-of:00000000-0000-0000-0000-000000000001"},
			"payload too big":      map[string]any{"payload": strings.Repeat("x", 65<<10)},
			"payload not JSON":     `{"payload": nope}`,
			"unknown field":        map[string]any{"paylod": 1},
			"malformed run_at key": `{"run_at": 12}`,
		} {
			res := b.do(t, http.MethodPost, runs, body, token)
			if res.status != http.StatusUnprocessableEntity && !(name == "payload not JSON" && res.status == http.StatusBadRequest) {
				t.Errorf("%s: %d %s", name, res.status, res.raw)
			}
		}
		var n int
		if err := b.server.opts.Pool.QueryRow(context.Background(), `SELECT count(*) FROM task_run_keys WHERE length(key) > 255`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("keys: %d %v", n, err)
		}
	})
}

func TestCancelRunAPI(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)
	token, _ := b.register(t, "cancel@example.com")
	body := onDemandTask("c")
	body["overlap"] = "allow"
	id := b.createTask(t, token, body)["id"].(string)
	trigger := func(t *testing.T) string {
		t.Helper()
		res := b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs", map[string]any{"run_at": time.Now().Add(time.Hour)}, token)
		if res.status != http.StatusAccepted {
			t.Fatalf("trigger: %d %s", res.status, res.raw)
		}
		return res.body["id"].(string)
	}
	jobState := func(t *testing.T, runID string) string {
		var state string
		if err := b.server.opts.Pool.QueryRow(context.Background(), `SELECT state FROM river_job WHERE args->>'run_id' = $1`, runID).Scan(&state); err != nil {
			t.Fatal(err)
		}
		return state
	}

	t.Run("a delayed run is cancelled with its job, idempotently", func(t *testing.T) {
		t.Parallel()
		run := trigger(t)
		for i := range 2 {
			res := b.do(t, http.MethodPost, "/v1/runs/"+run+"/cancel", nil, token)
			if res.status != http.StatusOK || res.body["status"] != "cancelled" || res.body["finished_at"] == nil {
				t.Fatalf("cancel %d: %d %s", i, res.status, res.raw)
			}
		}
		if s := jobState(t, run); s != "cancelled" {
			t.Fatalf("river job %s, want cancelled (it never starts)", s)
		}
	})

	t.Run("a finished run answers 409", func(t *testing.T) {
		t.Parallel()
		run := trigger(t)
		if _, err := b.server.opts.Pool.Exec(context.Background(), `UPDATE task_runs SET status = 'succeeded', finished_at = now() WHERE id = $1`, run); err != nil {
			t.Fatal(err)
		}
		requireProblem(t, b.do(t, http.MethodPost, "/v1/runs/"+run+"/cancel", nil, token), http.StatusConflict)
	})

	t.Run("another user's run is 404, a malformed id 422", func(t *testing.T) {
		t.Parallel()
		run := trigger(t)
		other, _ := b.register(t, "cancel-other@example.com")
		requireProblem(t, b.do(t, http.MethodPost, "/v1/runs/"+run+"/cancel", nil, other), http.StatusNotFound)
		requireProblem(t, b.do(t, http.MethodPost, "/v1/runs/not-a-uuid/cancel", nil, token), http.StatusUnprocessableEntity)
		requireProblem(t, b.do(t, http.MethodGet, "/v1/runs/"+run+"/attempts", nil, other), http.StatusNotFound)
		requireProblem(t, b.do(t, http.MethodGet, "/v1/runs/not-a-uuid/attempts", nil, token), http.StatusUnprocessableEntity)
		if res := b.do(t, http.MethodGet, "/v1/runs/"+run+"/attempts", nil, token); res.status != http.StatusOK || string(mustJSON(res.body["items"])) != "[]" {
			t.Fatalf("attempts of a run not started: %d %s", res.status, res.raw)
		}
		if s := jobState(t, run); s != "scheduled" {
			t.Fatalf("river job %s after refused cancels", s)
		}
	})
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestRetryAndDeadLetterAPI(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)
	token, _ := b.register(t, "retry@example.com")
	body := onDemandTask("r")
	body["overlap"] = "allow"
	id := b.createTask(t, token, body)["id"].(string)
	trigger := func(t *testing.T, payload any) string {
		t.Helper()
		res := b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs", map[string]any{"payload": payload}, token)
		if res.status != http.StatusAccepted {
			t.Fatalf("trigger: %d %s", res.status, res.raw)
		}
		return res.body["id"].(string)
	}
	fail := func(t *testing.T, run string) {
		t.Helper()
		if _, err := b.server.opts.Pool.Exec(context.Background(), `UPDATE task_runs SET status = 'failed', finished_at = now(), error = 'boom' WHERE id = $1`, run); err != nil {
			t.Fatal(err)
		}
	}
	failed := trigger(t, map[string]any{"n": 1})
	fail(t, failed)
	queued := trigger(t, nil)

	retry := b.do(t, http.MethodPost, "/v1/runs/"+failed+"/retry", nil, token)
	if retry.status != http.StatusAccepted || retry.body["retry_of"] != failed || retry.body["status"] != "queued" || string(mustJSON(retry.body["payload"])) != `{"n":1}` {
		t.Fatalf("retry: %d %s", retry.status, retry.raw)
	}
	if again := b.do(t, http.MethodPost, "/v1/runs/"+failed+"/retry", nil, token); again.status != http.StatusOK || again.body["id"] != retry.body["id"] {
		t.Fatalf("second retry of the same run: %d %s", again.status, again.raw)
	}
	requireProblem(t, b.do(t, http.MethodPost, "/v1/runs/"+queued+"/retry", nil, token), http.StatusConflict)
	if res := b.do(t, http.MethodPost, "/v1/runs/"+queued+"/cancel", nil, token); res.status != http.StatusOK {
		t.Fatalf("cancel: %d", res.status)
	}
	if res := b.do(t, http.MethodPost, "/v1/runs/"+queued+"/retry", nil, token); res.status != http.StatusAccepted || res.body["retry_of"] != queued {
		t.Fatalf("retry of a cancelled run: %d %s", res.status, res.raw)
	}
	requireProblem(t, b.do(t, http.MethodPost, "/v1/runs/bad/retry", nil, token), http.StatusUnprocessableEntity)
	if res := b.do(t, http.MethodPost, "/v1/runs/"+uuid.NewString()+"/retry", nil, token); res.status != http.StatusNotFound || res.body["detail"] != "no such run" {
		t.Fatalf("retry of an unknown run: %d %s", res.status, res.raw)
	}
	other, _ := b.register(t, "retry-other@example.com")
	requireProblem(t, b.do(t, http.MethodPost, "/v1/runs/"+failed+"/retry", nil, other), http.StatusNotFound)

	for _, path := range []string{"/v1/tasks/" + id + "/runs?status=failed", "/v1/runs?status=failed"} {
		res := b.do(t, http.MethodGet, path, nil, token)
		items, _ := res.body["items"].([]any)
		if res.status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["id"] != failed {
			t.Fatalf("%s: %d %s", path, res.status, res.raw)
		}
	}
	if res := b.do(t, http.MethodGet, "/v1/runs", nil, token); len(res.body["items"].([]any)) != 4 {
		t.Fatalf("all runs: %s", res.raw)
	}
	if res := b.do(t, http.MethodGet, "/v1/runs?status=failed", nil, other); len(res.body["items"].([]any)) != 0 {
		t.Fatalf("another user's dead letters: %s", res.raw)
	}
	requireProblem(t, b.do(t, http.MethodGet, "/v1/runs?status=dead", nil, token), http.StatusUnprocessableEntity)
}

func TestOverlapPoliciesAPI(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)
	token, _ := b.register(t, "policies@example.com")
	for _, overlap := range []string{"buffer_one", "cancel_other"} {
		body := webhookTask(overlap)
		body["overlap"] = overlap
		if got := b.createTask(t, token, body); got["overlap"] != overlap || got["max_concurrency"] != nil {
			t.Fatalf("create %s: %v", overlap, got)
		}
	}
	body := onDemandTask("limited")
	body["overlap"], body["max_concurrency"] = "allow", 2
	id := b.createTask(t, token, body)["id"].(string)
	if res := b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"max_concurrency": 5}, token); res.body["max_concurrency"] != 5.0 {
		t.Fatalf("patch limit: %s", res.raw)
	}
	if res := b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"name": "x"}, token); res.body["max_concurrency"] != 5.0 {
		t.Fatalf("an absent limit must stay: %s", res.raw)
	}
	if res := b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"max_concurrency": nil}, token); res.status != http.StatusOK || res.body["max_concurrency"] != nil {
		t.Fatalf("remove limit: %d %s", res.status, res.raw)
	}
	bad := onDemandTask("bad")
	bad["max_concurrency"] = 2 // overlap skip
	requireProblem(t, b.do(t, http.MethodPost, "/v1/tasks", bad, token), http.StatusUnprocessableEntity)
	bad["overlap"], bad["max_concurrency"] = "allow", 101
	requireProblem(t, b.do(t, http.MethodPost, "/v1/tasks", bad, token), http.StatusUnprocessableEntity)
	requireProblem(t, b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"max_concurrency": 0}, token), http.StatusUnprocessableEntity)
	requireProblem(t, b.do(t, http.MethodPatch, "/v1/tasks/"+id, map[string]any{"overlap": "queue"}, token), http.StatusUnprocessableEntity)
}

func TestBackfillAPI(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)
	token, _ := b.register(t, "backfill@example.com")
	body := webhookTask("daily")
	body["schedule"], body["timezone"] = "0 9 * * *", "Asia/Tokyo"
	id := b.createTask(t, token, body)["id"].(string)
	path := "/v1/tasks/" + id + "/backfill"
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -10)
	backfill := func(t *testing.T, from, to time.Time) response {
		t.Helper()
		return b.do(t, http.MethodPost, path, map[string]any{"from": from, "to": to}, token)
	}

	first := backfill(t, day, day.AddDate(0, 0, 3))
	if first.status != http.StatusAccepted || first.body["ticks"] != 3.0 || first.body["created"] != 3.0 {
		t.Fatalf("backfill: %d %s", first.status, first.raw)
	}
	for _, it := range first.body["items"].([]any) {
		at, _ := time.Parse(time.RFC3339, it.(map[string]any)["scheduled_for"].(string))
		if at.UTC().Hour() != 0 || it.(map[string]any)["trigger"] != "schedule" { // 09:00 in Tokyo
			t.Fatalf("tick %v", it)
		}
	}
	again := backfill(t, day, day.AddDate(0, 0, 3))
	if again.status != http.StatusAccepted || again.body["ticks"] != 3.0 || again.body["created"] != 0.0 {
		t.Fatalf("second backfill: %d %s", again.status, again.raw)
	}
	wider := backfill(t, day.AddDate(0, 0, 2), day.AddDate(0, 0, 5))
	if wider.body["ticks"] != 3.0 || wider.body["created"] != 2.0 {
		t.Fatalf("overlapping backfill: %s", wider.raw)
	}
	var runs, jobs int
	pool := b.server.opts.Pool
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM task_runs WHERE task_id = $1`, id).Scan(&runs)
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE args->>'task_id' = $1`, id).Scan(&jobs)
	if runs != 5 || jobs != 5 {
		t.Fatalf("%d runs and %d jobs, want 5 of each", runs, jobs)
	}

	secondly := webhookTask("secondly")
	secondly["schedule"] = "* * * * * *"
	sid := b.createTask(t, token, secondly)["id"].(string)
	every := webhookTask("every")
	every["schedule"] = "@every 1h"
	eid := b.createTask(t, token, every)["id"].(string)
	od := b.createTask(t, token, onDemandTask("od"))["id"].(string)
	now := time.Now()
	for name, req := range map[string]struct {
		path     string
		from, to any
	}{
		"too many ticks": {"/v1/tasks/" + sid + "/backfill", now.Add(-time.Hour), now.Add(-time.Minute)},
		"from after to":  {path, day.AddDate(0, 0, 2), day},
		"to in future":   {path, day, now.Add(time.Hour)},
		"over a year":    {path, day.AddDate(-2, 0, 0), day},
		"from year 1":    {path, "0001-01-01T00:00:00Z", "0001-01-02T00:00:00Z"},
		"years ago":      {path, day.AddDate(-2, 0, 0), day.AddDate(-2, 0, 3)},
		"no tick":        {path, day.Add(time.Hour), day.Add(2 * time.Hour)},
		"on-demand task": {"/v1/tasks/" + od + "/backfill", day, day.AddDate(0, 0, 1)},
		"@every task":    {"/v1/tasks/" + eid + "/backfill", day, day.AddDate(0, 0, 1)},
		"not a time":     {path, "yesterday", day},
		"malformed id":   {"/v1/tasks/nope/backfill", day, day.AddDate(0, 0, 1)},
	} {
		res := b.do(t, http.MethodPost, req.path, map[string]any{"from": req.from, "to": req.to}, token)
		if res.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s", name, res.status, res.raw)
		}
	}
	other, _ := b.register(t, "backfill-other@example.com")
	requireProblem(t, b.do(t, http.MethodPost, path, map[string]any{"from": day, "to": day.AddDate(0, 0, 1)}, other), http.StatusNotFound)
}
