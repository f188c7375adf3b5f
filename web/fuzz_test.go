package web

import (
	"net/http"
	"testing"
)

// FuzzTaskBodies sends arbitrary bodies to the task routes: whatever the
// bytes, the answer is not a 5xx. Without -fuzz the seeds run as a test.
func FuzzTaskBodies(f *testing.F) {
	b := setup(f)
	token, _ := b.register(f, "fuzz-tasks@example.com")
	id := b.createTask(f, token, webhookTask("fuzzed"))["id"].(string)
	for _, seed := range []string{
		validTaskFields, `{"name":"a\u0000b","schedule":"@hourly","action":{"type":"publish","event":"e"}}`,
		`{"name":"n","schedule":"@hourly","action":{"type":"publish","event":"e","payload":"\ud800"}}`,
		`{"name":"n","schedule":"0 0 31 2 *","action":{"type":"publish","event":"e"}}`,
		`{"name":"n","schedule":"@every 1ns","timezone":"Local","action":{"type":"webhook","url":"http://[::1]/"}}`,
		`{"action":{"type":"webhook","url":"https://example.com/","headers":{"X\u0000":"v"}}}`,
		`{"max_attempts":1e999}`, `[`, `{}`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, r := range []struct{ method, path string }{{http.MethodPost, "/v1/tasks"}, {http.MethodPatch, "/v1/tasks/" + id}} {
			if res := b.do(t, r.method, r.path, body, token); res.status >= 500 {
				t.Fatalf("%s %s %q: %d %s", r.method, r.path, body, res.status, res.raw)
			}
		}
	})
}
