package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/cmd/internal/replica"
	"github.com/switchboard/switchboard/infra/pgembed"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// firstRunLines bounds the output of a first run up to its first webhook
// run: one screen.
const firstRunLines = 25

// TestFirstRun starts the binary as a newcomer does, with nothing set but
// its data directory (the embedded PostgreSQL): the output is a short ready
// block naming the console, the API, the docs and the next step, and says
// webhooks may call local addresses; a webhook task pointed at a server on
// 127.0.0.1 runs with no setting; requests and River's routine messages
// stay out of the log, which fits on one screen.
func TestFirstRun(t *testing.T) {
	t.Parallel()
	if pgembed.FindBinDir() == "" {
		t.Skip("no PostgreSQL binaries installed")
	}
	p, err := replica.New(replica.Options{Bin: binary(t), Env: []string{"SWITCHBOARD_DATA_DIR=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, _, err := p.Terminate(30 * time.Second); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("output:\n%s", p.Output())
		}
	})
	if err := p.WaitReady(context.Background(), 90*time.Second); err != nil {
		t.Fatal(err)
	}
	base := p.URL("")
	testwait.For(t, 10*time.Second, "the ready block", func() bool { return strings.Contains(p.Output(), "\nnext: ") })
	out := p.Output()
	for _, want := range []string{
		"Switchboard is ready", "console   http://localhost:", "/console\n", "API       http://localhost:", "docs      http://localhost:",
		"webhooks  may call local and private addresses", "next: create an account in the console, then `", " admin grant EMAIL`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the ready block lacks %q:\n%s", want, out)
		}
	}

	var calls atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	defer hook.Close()
	token, _ := registerUserAt(t, base, "newcomer@example.com")
	status, task := call(t, http.MethodPost, base+"/v1/tasks", map[string]any{
		"name": "local hook", "action": map[string]any{"type": "webhook", "url": hook.URL}}, token)
	if status != http.StatusCreated {
		t.Fatalf("a webhook task to %s: %d %v", hook.URL, status, task)
	}
	status, run := call(t, http.MethodPost, base+"/v1/tasks/"+task["id"].(string)+"/runs", nil, token)
	if status != http.StatusAccepted {
		t.Fatalf("trigger: %d %v", status, run)
	}
	testwait.For(t, 30*time.Second, "the run to succeed", func() bool {
		_, r := call(t, http.MethodGet, base+"/v1/runs/"+run["id"].(string), nil, token)
		return r["status"] == "succeeded"
	})
	if calls.Load() != 1 {
		t.Errorf("the local server was called %d times, want 1", calls.Load())
	}

	out = p.Output()
	lines := strings.Count(out, "\n")
	t.Logf("first run, up to its first webhook run: %d lines of output", lines)
	if lines > firstRunLines {
		t.Errorf("%d lines of output, more than a screen (%d):\n%s", lines, firstRunLines, out)
	}
	if strings.Contains(out, `"msg":"request"`) || strings.Contains(out, "River client started") {
		t.Errorf("requests or River's routine messages are logged at info:\n%s", out)
	}
}
