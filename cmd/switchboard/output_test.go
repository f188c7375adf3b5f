package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// TestRunOutput: a webhook's JSON answer is its run's output on the run
// routes and in the task.run.succeeded event; an answer over
// SWITCHBOARD_RUN_OUTPUT_MAX_BYTES is kept cut, as a string, and flagged.
func TestRunOutput(t *testing.T) {
	t.Parallel()
	servers, dbURL := startReplicas(t, 1)
	srv := servers[0]
	big := `{"rows":"` + strings.Repeat("r", 70<<10) + `"}`
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("big") != "" {
			_, _ = w.Write([]byte(big))
			return
		}
		_, _ = w.Write([]byte(`{"total":42,"items":["a","b"]}`))
	}))
	t.Cleanup(target.Close)
	token, _ := registerUser(t, srv, "output@example.com")
	run := func(url string) map[string]any {
		taskID := createTask(t, srv.URL, token, map[string]any{"name": "out", "action": map[string]any{"type": "webhook", "url": url}})
		status, created := call(t, http.MethodPost, srv.URL+"/v1/tasks/"+taskID+"/runs", map[string]any{}, token)
		if status != http.StatusAccepted {
			t.Fatalf("trigger: %d %v", status, created)
		}
		var got map[string]any
		testwait.For(t, 20*time.Second, "the run to succeed", func() bool {
			_, got = call(t, http.MethodGet, srv.URL+"/v1/runs/"+created["id"].(string), nil, token)
			return got["status"] == "succeeded"
		})
		return got
	}

	small := run(target.URL)
	want := map[string]any{"total": 42.0, "items": []any{"a", "b"}}
	if out, _ := json.Marshal(small["output"]); string(out) != mustJSON(want) || small["output_truncated"] != false {
		t.Fatalf("run output %s (truncated %v), want %s", out, small["output_truncated"], mustJSON(want))
	}
	event := succeededEvent(t, dbURL, small["id"].(string))
	if out, _ := json.Marshal(event["output"]); string(out) != mustJSON(want) {
		t.Fatalf("task.run.succeeded carries output %s, want %s", out, mustJSON(want))
	}

	cut := run(target.URL + "?big=1")
	s, _ := cut["output"].(string)
	if cut["output_truncated"] != true || len(s) != 64<<10 || !strings.HasPrefix(s, `{"rows":"rrr`) {
		t.Fatalf("large output: truncated %v, %d bytes", cut["output_truncated"], len(s))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// succeededEvent is the stored task.run.succeeded event of a run.
func succeededEvent(t *testing.T, dbURL, runID string) map[string]any {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var payload []byte
	testwait.For(t, 10*time.Second, "the succeeded event to be stored", func() bool {
		err := conn.QueryRow(context.Background(), `
			SELECT payload FROM stream_events WHERE event = 'task.run.succeeded' AND position($1 in convert_from(payload, 'UTF8')) > 0`, runID).Scan(&payload)
		return err == nil
	})
	var ev map[string]any
	if err := json.Unmarshal(payload, &ev); err != nil {
		t.Fatalf("event payload %q: %v", payload, err)
	}
	return ev
}
