package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/cutproxy"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// cliUser is an account on a test server and the environment the command
// line runs in for it: the server's URL, an API key of the account and a
// config directory of its own.
type cliUser struct {
	srv       *testServer
	email     string
	token     string // the account's user token
	key       string // an API key of the account
	configDir string
	env       []string
}

// newCLIUser starts a server (webhooks to loopback allowed) and an account
// with an API key.
func newCLIUser(t *testing.T) *cliUser {
	t.Helper()
	cfg := testConfig(t, dbtest.NewDatabaseURL(t))
	cfg.WebhookPrivate = true
	srv := startServer(t, cfg)
	email := "cli-" + strings.ToLower(t.Name()) + "@example.com"
	token, _ := registerUser(t, srv, email)
	status, body := call(t, http.MethodPost, srv.URL+"/v1/api-keys", map[string]any{"name": "cli test"}, token)
	if status != http.StatusCreated {
		t.Fatalf("create a key: %d %v", status, body)
	}
	u := &cliUser{srv: srv, email: email, token: token, key: body["secret"].(string), configDir: t.TempDir()}
	u.env = []string{"SWITCHBOARD_URL=" + srv.URL, "SWITCHBOARD_API_KEY=" + u.key}
	return u
}

// cliEnv is the test process's environment without SWITCHBOARD_*, plus a
// config directory of its own and extra.
func (u *cliUser) cliEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHBOARD_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return append(append(env, "XDG_CONFIG_HOME="+u.configDir), extra...)
}

// cliResult is one finished command line.
type cliResult struct {
	stdout, stderr string
	code           int
}

// run runs the built binary as a process with u's environment (env
// replaces it when given) and stdin, and waits for it to exit.
func (u *cliUser) run(t *testing.T, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	bin := binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = u.cliEnv(append(append([]string{}, u.env...), env...))
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("switchboard %v: %v", args, err)
	}
	return cliResult{stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode()}
}

// ok runs a command line that must succeed and decodes its -o json answer
// into v (nil: not decoded).
func (u *cliUser) ok(t *testing.T, v any, args ...string) cliResult {
	t.Helper()
	r := u.run(t, nil, "", args...)
	if r.code != 0 {
		t.Fatalf("switchboard %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
			t.Fatalf("switchboard %v -o json: %v\n%s", args, err, r.stdout)
		}
	}
	return r
}

// cliProc is a command line running in the background.
type cliProc struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{}
}

// start runs a command line in the background; it is killed when the test
// ends.
func (u *cliUser) start(t *testing.T, env []string, args ...string) *cliProc {
	t.Helper()
	p := &cliProc{cmd: exec.Command(binary(t), args...), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Env = u.cliEnv(append(append([]string{}, u.env...), env...))
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("switchboard %v\nstdout: %s\nstderr: %s", args, p.stdout.text(), p.stderr.text())
		}
	})
	return p
}

// wait returns the exit code, failing the test after within.
func (p *cliProc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("still running after %s\nstdout: %s\nstderr: %s", within, p.stdout.text(), p.stderr.text())
		return -1
	}
}

func (b *lockedBuffer) text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// events are the run events a `runs tail -o json` printed so far.
func (p *cliProc) events(t *testing.T) []tailEvent {
	t.Helper()
	var out []tailEvent
	for _, line := range strings.Split(strings.TrimSpace(p.stdout.text()), "\n") {
		if line == "" {
			continue
		}
		var ev tailEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("tail printed a line that is not JSON: %v\n%s", err, line)
		}
		out = append(out, ev)
	}
	return out
}

// tailEvent is one line of `runs tail -o json`.
type tailEvent struct {
	Event  string `json:"event"`
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
	Run    struct {
		ID, TaskID, Status string
		HTTPStatus         *int `json:"http_status"`
	} `json:"run"`
}

func hasEvent(evs []tailEvent, runID, event string) bool {
	for _, ev := range evs {
		if ev.Run.ID == runID && ev.Event == event {
			return true
		}
	}
	return false
}

// connections counts the sockets a tail opened (it says so on stderr).
func (p *cliProc) connections() int {
	return strings.Count(p.stderr.text(), "following run events")
}

type idOnly struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// TestCLICreateTriggerTail: a webhook task made with `tasks create`, run
// with `tasks trigger`, is followed by `runs tail RUN_ID` over the
// WebSocket until it succeeds (the hook holds the call until the tail is
// connected, so the end arrives as an event, not from the first read);
// the tail exits 0. A run that fails ends its tail with exit 4.
func TestCLICreateTriggerTail(t *testing.T) {
	t.Parallel()
	u := newCLIUser(t)
	hook := newBlockingHook(t)
	var task struct {
		idOnly
		SigningSecret string `json:"signing_secret"`
	}
	u.ok(t, &task, "tasks", "create", "cli hook", "--webhook", hook.URL, "--max-attempts", "1", "-o", "json")
	if task.ID == "" || !strings.HasPrefix(task.SigningSecret, "whsec_") {
		t.Fatalf("created task %+v: want an id and its signing secret", task)
	}
	var run idOnly
	u.ok(t, &run, "tasks", "trigger", task.ID, "--payload", `{"n":1}`, "-o", "json")
	if got := <-hook.first; got != run.ID {
		t.Fatalf("the hook was called for run %s, triggered %s", got, run.ID)
	}
	tail := u.start(t, nil, "runs", "tail", run.ID, "-o", "json")
	testwait.For(t, 30*time.Second, "the tail to connect", func() bool { return tail.connections() >= 1 })
	if evs := tail.events(t); len(evs) != 0 {
		t.Fatalf("the tail printed %v before the run finished", evs)
	}
	hook.Release()
	if code := tail.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("runs tail exited %d, want 0\n%s", code, tail.stderr.text())
	}
	evs := tail.events(t)
	last := evs[len(evs)-1]
	if last.Event != "task.run.succeeded" || last.Run.ID != run.ID || last.Stream == "" || last.Offset == 0 {
		t.Fatalf("last event %+v: want the run's task.run.succeeded from its stream", last)
	}

	t.Run("a failed run exits 4", func(t *testing.T) {
		failing := newStatusHook(t, http.StatusInternalServerError)
		var bad, badRun idOnly
		u.ok(t, &bad, "tasks", "create", "cli failing", "--webhook", failing, "--max-attempts", "1", "-o", "json")
		u.ok(t, &badRun, "tasks", "trigger", bad.ID, "-o", "json")
		r := u.run(t, nil, "", "runs", "tail", badRun.ID)
		if r.code != 4 || !strings.Contains(r.stderr, "failed") {
			t.Fatalf("tail of a failing run: exit %d, stderr %q; want 4 naming the failure", r.code, r.stderr)
		}
	})
}

// newStatusHook is a webhook target that answers status.
func newStatusHook(t *testing.T, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestCLITailResumesAfterADrop: a `runs tail` whose connection is cut
// (through a proxy) while a run happens prints that run's events once it
// reconnects — resumed from the last offset it had, none missed and none
// repeated.
func TestCLITailResumesAfterADrop(t *testing.T) {
	t.Parallel()
	u := newCLIUser(t)
	proxy, err := cutproxy.Start(u.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	var task idOnly
	u.ok(t, &task, "tasks", "create", "cli publish", "--publish", "cli.ping", "--overlap", "allow", "-o", "json")
	tail := u.start(t, []string{"SWITCHBOARD_URL=http://" + proxy.Addr()}, "runs", "tail", "--task", task.ID, "-o", "json")
	testwait.For(t, 30*time.Second, "the tail to connect", func() bool { return tail.connections() == 1 })

	var before idOnly
	u.ok(t, &before, "tasks", "trigger", task.ID, "-o", "json")
	testwait.For(t, 30*time.Second, "the first run's end in the tail", func() bool {
		return hasEvent(tail.events(t), before.ID, "task.run.succeeded")
	})
	proxy.Cut()
	testwait.For(t, 30*time.Second, "the tail to notice the drop", func() bool {
		return strings.Contains(tail.stderr.text(), "connection lost")
	})
	var during idOnly
	u.ok(t, &during, "tasks", "trigger", task.ID, "-o", "json")
	testwait.For(t, 30*time.Second, "the second run to succeed", func() bool {
		var r idOnly
		u.ok(t, &r, "runs", "get", during.ID, "-o", "json")
		return r.Status == "succeeded"
	})
	proxy.Restore()
	testwait.For(t, 60*time.Second, "the second run's end in the tail after the drop", func() bool {
		return hasEvent(tail.events(t), during.ID, "task.run.succeeded")
	})
	requireOnceInOrder(t, tail.events(t))
}

// requireOnceInOrder: each stream's offsets arrive once, increasing by 1.
func requireOnceInOrder(t *testing.T, evs []tailEvent) {
	t.Helper()
	last := map[string]int64{}
	for _, ev := range evs {
		if prev, ok := last[ev.Stream]; ok && ev.Offset != prev+1 {
			t.Fatalf("stream %s: offset %d after %d (events %+v)", ev.Stream, ev.Offset, prev, evs)
		}
		last[ev.Stream] = ev.Offset
	}
}

// TestCLIJSONAndErrors: -o json answers parse; a wrong key exits 1 with
// the API's problem detail on stderr; no server answering exits 3; a bad
// command line exits 2.
func TestCLIJSONAndErrors(t *testing.T) {
	t.Parallel()
	u := newCLIUser(t)
	var task idOnly
	u.ok(t, &task, "tasks", "create", "cli json", "--schedule", "@hourly", "--publish", "cli.json", "-o", "json")
	var tasks struct {
		Items []idOnly `json:"items"`
	}
	u.ok(t, &tasks, "tasks", "list", "-o", "json")
	if len(tasks.Items) != 1 || tasks.Items[0].ID != task.ID {
		t.Fatalf("tasks list -o json: %+v, want the one task %s", tasks, task.ID)
	}
	var paused struct {
		Active bool `json:"active"`
	}
	u.ok(t, &paused, "tasks", "pause", task.ID, "-o", "json")
	var keys struct {
		Items []struct{ Prefix string } `json:"items"`
	}
	r := u.run(t, nil, "correct horse\n", "keys", "list", "--email", u.email, "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &keys); r.code != 0 || err != nil {
		t.Fatalf("keys list --email: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if paused.Active || len(keys.Items) != 1 || !strings.HasPrefix(u.key, keys.Items[0].Prefix) {
		t.Fatalf("pause: active %v; keys list: %+v", paused.Active, keys)
	}
	if r := u.run(t, nil, "", "keys", "list"); r.code != 1 || !strings.Contains(r.stderr, "admin role") {
		t.Fatalf("keys list with a key without the admin scope: exit %d, stderr %q; want 1 and the API's detail", r.code, r.stderr)
	}
	if r := u.ok(t, nil, "tasks", "list"); !strings.Contains(r.stdout, "cli json") || !strings.Contains(r.stdout, "NAME") {
		t.Fatalf("tasks list as a table:\n%s", r.stdout)
	}

	t.Run("a wrong key", func(t *testing.T) {
		wrong := "sbk_" + strings.Repeat("A", 43)
		_, problem := call(t, http.MethodGet, u.srv.URL+"/v1/tasks", nil, wrong)
		detail, _ := problem["detail"].(string)
		r := u.run(t, []string{"SWITCHBOARD_API_KEY=" + wrong}, "", "tasks", "list", "-o", "json")
		if r.code != 1 || detail == "" || !strings.Contains(r.stderr, detail) || r.stdout != "" {
			t.Fatalf("wrong key: exit %d, stderr %q, stdout %q; want 1 and the API's detail %q", r.code, r.stderr, r.stdout, detail)
		}
	})
	t.Run("no server", func(t *testing.T) {
		r := u.run(t, []string{"SWITCHBOARD_URL=http://127.0.0.1:1"}, "", "runs", "list")
		if r.code != 3 {
			t.Fatalf("no server: exit %d, stderr %q; want 3", r.code, r.stderr)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{{"tasks"}, {"tasks", "get"}, {"runs", "list", "--nope"}, {"tasks", "list", "-o", "yaml"}} {
			if r := u.run(t, nil, "", args...); r.code != 2 {
				t.Errorf("switchboard %v: exit %d, want 2 (%s)", args, r.code, r.stderr)
			}
		}
	})
}

// TestCLILogin: `login` with a password on stdin stores a new API key in
// the config directory, readable by its owner only; the commands use it
// with no key in the environment; `logout` revokes it and removes the file.
func TestCLILogin(t *testing.T) {
	t.Parallel()
	u := newCLIUser(t)
	onlyURL := []string{"SWITCHBOARD_API_KEY="}
	r := u.run(t, onlyURL, "correct horse\n", "login", "--email", u.email)
	if r.code != 0 {
		t.Fatalf("login: exit %d\n%s", r.code, r.stderr)
	}
	path := filepath.Join(u.configDir, "switchboard", "login.json")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("login stored no file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("stored login has mode %v, want 0600", fi.Mode().Perm())
	}
	var tasks struct {
		Items []idOnly `json:"items"`
	}
	if r := u.run(t, onlyURL, "", "tasks", "list", "-o", "json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &tasks) != nil {
		t.Fatalf("tasks list with the stored login: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := u.keyCount(t); n != 2 {
		t.Fatalf("%d keys after login, want the test's and the login's", n)
	}
	if r := u.run(t, onlyURL, "correct horse\n", "logout", "--email", u.email); r.code != 0 {
		t.Fatalf("logout: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("logout left the stored login: %v", err)
	}
	if n := u.keyCount(t); n != 1 {
		t.Fatalf("after logout %d keys, want the login's revoked", n)
	}
}

// keyCount is the number of the account's keys, read with its token.
func (u *cliUser) keyCount(t *testing.T) int {
	t.Helper()
	status, body := call(t, http.MethodGet, u.srv.URL+"/v1/api-keys", nil, u.token)
	items, _ := body["items"].([]any)
	if status != http.StatusOK {
		t.Fatalf("list keys: %d %v", status, body)
	}
	return len(items)
}
