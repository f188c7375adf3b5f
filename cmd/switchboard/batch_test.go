package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// batchItems is a batch of n items whose last 10 repeat idempotency keys
// of earlier items.
func batchItems(n int) []map[string]any {
	items := make([]map[string]any, n)
	for i := range items {
		key := fmt.Sprintf("order-%d", i)
		if i >= n-10 {
			key = fmt.Sprintf("order-%d", (i-(n-10))*3)
		}
		items[i] = map[string]any{"idempotency_key": key, "payload": map[string]any{"order": i}}
	}
	return items
}

// TestBatchTriggerAcrossReplicas: two identical batches of 1 000 items (10
// repeated keys) sent at once to two replicas make 990 runs, each once:
// one batch creates them and the other answers them replayed, every run is
// announced task.run.queued once and calls the webhook once.
func TestBatchTriggerAcrossReplicas(t *testing.T) {
	t.Parallel()
	servers, dbURL := startReplicas(t, 2)
	hook := newHookCalls(t)
	token, _ := registerUser(t, servers[0], "batch@example.com")
	taskID := createTask(t, servers[0].URL, token, map[string]any{
		"name": "orders", "overlap": "allow", "action": map[string]any{"type": "webhook", "url": hook.URL},
	})
	body := map[string]any{"items": batchItems(1000)}
	answers := make([]map[string]any, 2)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 2 {
		wg.Go(func() {
			<-start
			status, out := call(t, http.MethodPost, servers[i].URL+"/v1/tasks/"+taskID+"/runs/batch", body, token)
			if status != http.StatusOK {
				t.Errorf("replica %d: %d %v", i, status, out)
			}
			answers[i] = out
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	created := answers[0]["created"].(float64) + answers[1]["created"].(float64)
	if created != 990 {
		t.Fatalf("created %v and %v, want 990 in all", answers[0]["created"], answers[1]["created"])
	}
	ids := requireSameRuns(t, answers[0]["items"].([]any), answers[1]["items"].([]any))
	if n := dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1`, taskID); n != 990 {
		t.Fatalf("%d runs, want 990", n)
	}
	if n := dbCount(t, dbURL, `SELECT count(*) FROM river_job WHERE args->>'task_id' = $1`, taskID); n != 990 {
		t.Fatalf("%d river jobs, want 990", n)
	}
	queued := metric(t, servers[0], "switchboard_task_runs_total", `status="queued"`) +
		metric(t, servers[1], "switchboard_task_runs_total", `status="queued"`)
	if queued != 990 {
		t.Fatalf("%v task.run.queued announcements, want 990", queued)
	}
	testwait.For(t, 60*time.Second, "every run to call the webhook", func() bool {
		for id := range ids {
			if len(hook.of(id)) == 0 {
				return false
			}
		}
		return true
	})
	for id := range ids {
		if n := len(hook.of(id)); n != 1 {
			t.Fatalf("run %s called %d times", id, n)
		}
	}
}

// requireSameRuns checks that two answers to one batch name the same run
// per item, item 990+i repeating item 3i, and returns the distinct runs.
func requireSameRuns(t *testing.T, a, b []any) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for i := range a {
		x, y := a[i].(map[string]any), b[i].(map[string]any)
		xr, _ := x["run"].(map[string]any)
		yr, _ := y["run"].(map[string]any)
		if xr == nil || yr == nil || xr["id"] != yr["id"] {
			t.Fatalf("item %d: %v and %v", i, x, y)
		}
		if i >= 990 && (x["replayed"] != true || xr["id"] != a[(i-990)*3].(map[string]any)["run"].(map[string]any)["id"]) {
			t.Fatalf("repeated key at item %d: %v", i, x)
		}
		ids[xr["id"].(string)] = true
	}
	if len(ids) != 990 {
		t.Fatalf("%d distinct runs, want 990", len(ids))
	}
	return ids
}
