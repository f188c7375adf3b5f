package web

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRotateSecret: a rotation answers a new signing secret once, with the
// overlap's end (24 h by default, or the time asked), which the task then
// shows without the secret; a past time ends the overlap at once; an
// overlap beyond 30 days is a 422 that changes nothing.
func TestRotateSecret(t *testing.T) {
	t.Parallel()
	b := setupJobs(t)
	token, _ := b.register(t, "rotate@example.com")
	task := b.createTask(t, token, webhookTask("rotated"))
	id, first := task["id"].(string), task["signing_secret"].(string)
	if task["previous_secret_expires_at"] != nil {
		t.Fatalf("a new task has an overlap: %v", task["previous_secret_expires_at"])
	}
	path := "/v1/tasks/" + id + "/rotate-secret"

	res := b.do(t, http.MethodPost, path, nil, token)
	second, _ := res.body["signing_secret"].(string)
	if res.status != http.StatusOK || !strings.HasPrefix(second, "whsec_") || second == first {
		t.Fatalf("rotate: %d %s", res.status, res.raw)
	}
	until, err := time.Parse(time.RFC3339Nano, res.body["previous_secret_expires_at"].(string))
	if err != nil || until.Sub(time.Now().Add(24*time.Hour)).Abs() > time.Minute {
		t.Fatalf("previous_secret_expires_at %v (%v), want about 24 h from now", res.body["previous_secret_expires_at"], err)
	}
	got := b.do(t, http.MethodGet, "/v1/tasks/"+id, nil, token)
	if _, shown := got.body["signing_secret"]; shown || got.body["previous_secret_expires_at"] == nil {
		t.Fatalf("after a rotation the task shows %s", got.raw)
	}

	want := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	res = b.do(t, http.MethodPost, path, map[string]any{"previous_expires_at": want}, token)
	if res.status != http.StatusOK || res.body["previous_secret_expires_at"] != want.Format(time.RFC3339) {
		t.Fatalf("rotate until %s: %d %s", want, res.status, res.raw)
	}
	res = b.do(t, http.MethodPost, path, map[string]any{"previous_expires_at": time.Now().Add(-time.Second)}, token)
	if res.status != http.StatusOK || res.body["previous_secret_expires_at"] != nil {
		t.Fatalf("rotate with no overlap: %d %s", res.status, res.raw)
	}

	before := b.do(t, http.MethodGet, "/v1/tasks/"+id, nil, token).body["updated_at"]
	requireProblem(t, b.do(t, http.MethodPost, path, map[string]any{"previous_expires_at": time.Now().Add(31 * 24 * time.Hour)}, token),
		http.StatusUnprocessableEntity)
	requireProblem(t, b.do(t, http.MethodPost, path, map[string]any{"previous_expires_at": "soon"}, token), http.StatusUnprocessableEntity)
	if after := b.do(t, http.MethodGet, "/v1/tasks/"+id, nil, token).body["updated_at"]; after != before {
		t.Fatalf("a refused rotation changed the task: updated_at %v → %v", before, after)
	}
}
