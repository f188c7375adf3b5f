package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// startReplicas starts n full replicas (separate pools, River clients and
// claim loops) on one database, webhooks to loopback allowed.
func startReplicas(t *testing.T, n int) (servers []*testServer, dbURL string) {
	t.Helper()
	dbURL = dbtest.NewDatabaseURL(t)
	for range n {
		cfg := testConfig(t, dbURL)
		cfg.WebhookPrivate = true
		servers = append(servers, startServer(t, cfg))
	}
	return servers, dbURL
}

// hookCalls is a webhook target that records when each run id was called.
type hookCalls struct {
	*httptest.Server
	mu     sync.Mutex
	calls  map[string][]time.Time
	bodies map[string]string // run id → last body
}

func newHookCalls(t *testing.T) *hookCalls {
	h := &hookCalls{calls: map[string][]time.Time{}, bodies: map[string]string{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies[r.Header.Get("webhook-id")] = string(body)
		h.calls[r.Header.Get("webhook-id")] = append(h.calls[r.Header.Get("webhook-id")], time.Now())
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookCalls) body(id string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bodies[id]
}

func (h *hookCalls) of(id string) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.calls[id]...)
}

func dbCount(t *testing.T, dbURL, sql string, args ...any) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestIdempotentTriggersAcrossReplicas: 50 concurrent triggers with one key,
// spread over three replicas, make exactly one run, and every answer is it.
func TestIdempotentTriggersAcrossReplicas(t *testing.T) {
	t.Parallel()
	servers, dbURL := startReplicas(t, 3)
	hook := newHookCalls(t)
	token, _ := registerUser(t, servers[0], "idem@example.com")
	taskID := createTask(t, servers[0].URL, token, map[string]any{
		"name": "charge", "overlap": "allow", "action": map[string]any{"type": "webhook", "url": hook.URL},
	})

	const n = 50
	ids := make([]string, n)
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			status, run := call(t, http.MethodPost, servers[i%3].URL+"/v1/tasks/"+taskID+"/runs",
				map[string]any{"idempotency_key": "charge-2026-12-01", "payload": map[string]any{"amount": 5}}, token)
			statuses[i] = status
			ids[i], _ = run["id"].(string)
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i := range n {
		if ids[i] == "" || ids[i] != ids[0] {
			t.Fatalf("answer %d: %d run %q, want run %q", i, statuses[i], ids[i], ids[0])
		}
		if statuses[i] == http.StatusAccepted {
			created++
		} else if statuses[i] != http.StatusOK {
			t.Fatalf("answer %d: status %d", i, statuses[i])
		}
	}
	if created != 1 {
		t.Fatalf("%d answers said created (202), want 1", created)
	}
	if runs := dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1`, taskID); runs != 1 {
		t.Fatalf("%d runs, want 1", runs)
	}
	testwait.For(t, 15*time.Second, "the run to call the webhook", func() bool { return len(hook.of(ids[0])) == 1 })
	if jobs := dbCount(t, dbURL, `SELECT count(*) FROM river_job WHERE args->>'run_id' = $1`, ids[0]); jobs != 1 {
		t.Fatalf("%d river jobs, want 1", jobs)
	}
	if b := hook.body(ids[0]); b != `{"amount": 5}` && b != `{"amount":5}` {
		t.Fatalf("the webhook got %q, want the run's payload", b)
	}
}

// TestDelayedRunStartsAtRunAt: runs with run_at, spread over 5 s (a whole
// period of River's scheduler), start on one of three replicas at run_at,
// never before; the test logs how long after.
func TestDelayedRunStartsAtRunAt(t *testing.T) {
	t.Parallel()
	servers, _ := startReplicas(t, 3)
	hook := newHookCalls(t)
	token, _ := registerUser(t, servers[1], "delay@example.com")
	taskID := createTask(t, servers[1].URL, token, map[string]any{
		"name": "later", "overlap": "allow", "action": map[string]any{"type": "webhook", "url": hook.URL},
	})
	base := time.Now().Add(2 * time.Second).UTC()
	runAt := map[string]time.Time{}
	for i := range 4 {
		at := base.Add(time.Duration(i) * 1300 * time.Millisecond)
		status, run := call(t, http.MethodPost, servers[i%3].URL+"/v1/tasks/"+taskID+"/runs", map[string]any{"run_at": at}, token)
		if status != http.StatusAccepted {
			t.Fatalf("trigger: %d %v", status, run)
		}
		runAt[run["id"].(string)] = at
	}
	var worst time.Duration
	for id, at := range runAt {
		testwait.For(t, 20*time.Second, "the delayed run to call the webhook", func() bool { return len(hook.of(id)) > 0 })
		lag := hook.of(id)[0].Sub(at)
		if lag < 0 {
			t.Fatalf("run %s called %s before run_at", id, -lag)
		}
		worst = max(worst, lag)
		testwait.For(t, 10*time.Second, "the run to succeed", func() bool {
			_, r := call(t, http.MethodGet, servers[0].URL+"/v1/runs/"+id, nil, token)
			return r["status"] == "succeeded"
		})
	}
	// The lag is a figure, not an assertion (it grows with machine load):
	// about 0.5–0.9 s on an idle machine, River's one-second poll.
	t.Logf("delayed runs called at most %s after run_at", worst.Round(time.Millisecond))
}

// holdingHook holds every call until the caller goes away, and reports each
// aborted call's run id.
type holdingHook struct {
	*httptest.Server
	called  chan string
	aborted chan string
}

func newHoldingHook(t *testing.T) *holdingHook {
	h := &holdingHook{called: make(chan string, 16), aborted: make(chan string, 16)}
	stop := make(chan struct{})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("webhook-id")
		// Reading the body to its end lets the server notice the client
		// going away (it then watches the connection).
		_, _ = io.Copy(io.Discard, r.Body)
		h.called <- id
		select {
		case <-r.Context().Done():
			h.aborted <- id
		case <-stop:
		}
	}))
	t.Cleanup(func() {
		close(stop)
		h.Close()
	})
	return h
}

func recv(t *testing.T, ch chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s within 20 s", what)
		return ""
	}
}

// runningNode is the node id whose River client runs the run's job.
func runningNode(t *testing.T, dbURL, runID string) string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var node string
	err = conn.QueryRow(context.Background(), `
		SELECT attempted_by[array_length(attempted_by, 1)] FROM river_job WHERE args->>'run_id' = $1`, runID).Scan(&node)
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// TestCancelAbortsTheRunningWebhook: a run's webhook call is in flight on
// one replica; cancelling it through another replica aborts the call at the
// target, the run ends cancelled (not retried), and the owner's socket gets
// task.run.cancelled.
func TestCancelAbortsTheRunningWebhook(t *testing.T) {
	t.Parallel()
	servers, dbURL := startReplicas(t, 3)
	hook := newHoldingHook(t)
	token, owner := registerUser(t, servers[0], "abort@example.com")
	sock := connect(t, servers[0], token)
	connected(t, servers[0], owner, 1)
	taskID := createTask(t, servers[0].URL, token, map[string]any{
		"name": "slow", "timeout_seconds": 120, "max_attempts": 3, "action": map[string]any{"type": "webhook", "url": hook.URL},
	})
	status, run := call(t, http.MethodPost, servers[0].URL+"/v1/tasks/"+taskID+"/runs", nil, token)
	if status != http.StatusAccepted {
		t.Fatalf("trigger: %d %v", status, run)
	}
	id := run["id"].(string)
	if got := recv(t, hook.called, "webhook call"); got != id {
		t.Fatalf("called for %s", got)
	}
	node := runningNode(t, dbURL, id)
	var other *testServer
	for _, s := range servers {
		if s.nodeID != node {
			other = s
			break
		}
	}
	status, body := call(t, http.MethodPost, other.URL+"/v1/runs/"+id+"/cancel", nil, token)
	if status != http.StatusOK || body["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v", status, body)
	}
	if got := recv(t, hook.aborted, "aborted call"); got != id {
		t.Fatalf("aborted %s", got)
	}
	testwait.For(t, 15*time.Second, "the job to be finalised cancelled", func() bool {
		return dbCount(t, dbURL, `SELECT count(*) FROM river_job WHERE args->>'run_id' = $1 AND state = 'cancelled'`, id) == 1
	})
	if s, attempt := runState(t, dbURL, id); s != "cancelled" || attempt != 1 {
		t.Fatalf("run %s after %d attempts, want cancelled after 1", s, attempt)
	}
	status, attempts := call(t, http.MethodGet, servers[2].URL+"/v1/runs/"+id+"/attempts", nil, token)
	items, _ := attempts["items"].([]any)
	if status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["status"] != "cancelled" || items[0].(map[string]any)["finished_at"] == nil {
		t.Fatalf("attempts: %d %v", status, attempts)
	}
	select {
	case again := <-hook.called:
		t.Fatalf("the cancelled run was called again (%s)", again)
	default:
	}
	for {
		select {
		case f := <-sock.frames:
			if f.Event == "task.run.cancelled" && strings.Contains(string(f.Payload), id) {
				return
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no task.run.cancelled on the owner's socket")
		}
	}
}

// TestBackfillTwiceAcrossReplicas: the same range backfilled concurrently
// on two replicas and again on a third gives one run per tick, each called
// once at the target.
func TestBackfillTwiceAcrossReplicas(t *testing.T) {
	t.Parallel()
	servers, dbURL := startReplicas(t, 3)
	hook := newHookCalls(t)
	token, _ := registerUser(t, servers[0], "backfill@example.com")
	taskID := createTask(t, servers[0].URL, token, map[string]any{
		"name": "minutely", "schedule": "* * * * *", "overlap": "allow", "action": map[string]any{"type": "webhook", "url": hook.URL},
	})
	to := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	range_ := map[string]any{"from": to.Add(-30 * time.Minute), "to": to}
	var wg sync.WaitGroup
	created := make([]float64, 3)
	for i := range 2 {
		wg.Go(func() {
			status, body := call(t, http.MethodPost, servers[i].URL+"/v1/tasks/"+taskID+"/backfill", range_, token)
			if status != http.StatusAccepted {
				t.Errorf("backfill on replica %d: %d %v", i, status, body)
			}
			created[i], _ = body["created"].(float64)
		})
	}
	wg.Wait()
	_, body := call(t, http.MethodPost, servers[2].URL+"/v1/tasks/"+taskID+"/backfill", range_, token)
	created[2], _ = body["created"].(float64)
	if created[0]+created[1] != 30 || created[2] != 0 {
		t.Fatalf("created %v, want 30 in all and none the third time", created)
	}
	if n := dbCount(t, dbURL, `SELECT count(DISTINCT scheduled_for) FROM task_runs WHERE task_id = $1 AND scheduled_for < $2`, taskID, to); n != 30 {
		t.Fatalf("%d ticks have runs", n)
	}
	testwait.For(t, 60*time.Second, "every backfilled run to succeed", func() bool {
		return dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND scheduled_for < $2 AND status = 'succeeded'`, taskID, to) == 30
	})
	if n := dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND scheduled_for < $2`, taskID, to); n != 30 {
		t.Fatalf("%d runs for 30 ticks", n)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	for id, calls := range hook.calls {
		if len(calls) != 1 {
			t.Fatalf("run %s called %d times", id, len(calls))
		}
	}
}
