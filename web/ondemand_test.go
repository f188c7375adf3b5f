package web

import (
	"net/http"
	"testing"
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
