package web

import (
	"net/http"
	"testing"
	"time"
)

func TestBatchTriggerAPI(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)

	t.Run("one answer per item, in order", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "batch-items@example.com")
		task := onDemandTask("batch")
		task["overlap"] = "allow"
		id := b.createTask(t, token, task)["id"].(string)
		past := time.Now().Add(-time.Hour).Format(time.RFC3339)
		res := b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs/batch", map[string]any{"items": []any{
			map[string]any{"payload": map[string]any{"n": 1}, "idempotency_key": "a"},
			map[string]any{"run_at": past},
			map[string]any{"idempotency_key": "a", "payload": "ignored: the key answers its run"},
			map[string]any{},
		}}, token)
		if res.status != http.StatusOK || res.body["created"] != 2.0 || res.body["replayed"] != 1.0 || res.body["failed"] != 1.0 {
			t.Fatalf("batch: %d %s", res.status, res.raw)
		}
		items := res.body["items"].([]any)
		first, bad, again := items[0].(map[string]any), items[1].(map[string]any), items[2].(map[string]any)
		if first["status"] != 202.0 || first["run"].(map[string]any)["trigger"] != "manual" || first["problem"] != nil {
			t.Fatalf("created item: %v", first)
		}
		problem, _ := bad["problem"].(map[string]any)
		if bad["status"] != 422.0 || bad["run"] != nil || problem == nil ||
			problem["errors"].([]any)[0].(map[string]any)["location"] != "body.items[1].run_at" {
			t.Fatalf("invalid item: %v", bad)
		}
		if again["status"] != 200.0 || again["replayed"] != true || again["run"].(map[string]any)["id"] != first["run"].(map[string]any)["id"] {
			t.Fatalf("repeated key: %v", again)
		}
		list := b.do(t, http.MethodGet, "/v1/tasks/"+id+"/runs", nil, token)
		if n := len(list.body["items"].([]any)); n != 2 {
			t.Fatalf("%d runs listed, want 2", n)
		}
	})

	t.Run("bounds and policies refuse the whole batch", func(t *testing.T) {
		t.Parallel()
		token, _ := b.register(t, "batch-bounds@example.com")
		task := onDemandTask("cancel-other")
		task["overlap"] = "cancel_other"
		id := b.createTask(t, token, task)["id"].(string)
		requireProblem(t, b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs/batch", map[string]any{"items": []any{map[string]any{}}}, token), http.StatusConflict)
		requireProblem(t, b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs/batch", map[string]any{"items": make([]any, 1001)}, token), http.StatusUnprocessableEntity)
		other, _ := b.register(t, "batch-other@example.com")
		requireProblem(t, b.do(t, http.MethodPost, "/v1/tasks/"+id+"/runs/batch", map[string]any{"items": []any{map[string]any{}}}, other), http.StatusNotFound)
		list := b.do(t, http.MethodGet, "/v1/tasks/"+id+"/runs", nil, token)
		if n := len(list.body["items"].([]any)); n != 0 {
			t.Fatalf("%d runs made by refused batches", n)
		}
	})
}
