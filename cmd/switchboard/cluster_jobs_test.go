package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// createTask creates a task through srv and returns its id.
func createTask(t *testing.T, srv string, token string, task map[string]any) string {
	t.Helper()
	status, body := call(t, http.MethodPost, srv+"/v1/tasks", task, token)
	if status != http.StatusCreated {
		t.Fatalf("create task: %d %v", status, body)
	}
	return body["id"].(string)
}

func claimed(t *testing.T, s *testServer) float64 {
	return metric(t, s, "switchboard_claim_batch_size_sum", "")
}

func TestDrainedNodeStopsClaiming(t *testing.T) {
	t.Parallel()
	servers, admin := startCluster(t, 3)
	token, _ := registerUser(t, servers[0], "ticks@example.com")
	createTask(t, servers[0].URL, token, map[string]any{
		"name": "tick", "schedule": "@every 1s", "action": map[string]any{"type": "publish", "event": "tick"},
	})
	drained := servers[1]
	if status, body := call(t, http.MethodPost, servers[2].URL+"/v1/admin/nodes/"+drained.nodeID+"/drain", nil, admin); status != http.StatusOK {
		t.Fatalf("drain: %d %v", status, body)
	}
	others := func() float64 { return claimed(t, servers[0]) + claimed(t, servers[2]) }
	// A claim already in flight when the drain arrived may still commit:
	// count from after the others' next claim.
	start := others()
	testwait.For(t, 15*time.Second, "another node to claim a tick", func() bool { return others() > start })
	before, othersBefore := claimed(t, drained), others()
	testwait.For(t, 20*time.Second, "the other nodes to claim 4 more ticks", func() bool { return others() >= othersBefore+4 })
	if after := claimed(t, drained); after != before {
		t.Fatalf("the drained node claimed %v ticks after the drain", after-before)
	}
	t.Logf("others claimed %v ticks while the drained node claimed none", others()-othersBefore)
}

// blockingHook is a webhook target that holds the first call of every run
// until released, and answers retries at once. It records every call.
type blockingHook struct {
	*httptest.Server
	mu      sync.Mutex
	calls   map[string][]time.Time // webhook-id (the run id) → call times
	first   chan string            // the first run id called
	release chan struct{}
	once    sync.Once
}

func newBlockingHook(t *testing.T) *blockingHook {
	h := &blockingHook{calls: map[string][]time.Time{}, first: make(chan string, 1), release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("webhook-id")
		h.mu.Lock()
		h.calls[id] = append(h.calls[id], time.Now())
		hold := len(h.calls) == 1 && len(h.calls[id]) == 1
		h.mu.Unlock()
		if hold {
			h.first <- id
			select {
			case <-h.release:
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() {
		h.Release()
		h.Close()
	})
	return h
}

// Release lets the held call answer.
func (h *blockingHook) Release() { h.once.Do(func() { close(h.release) }) }

func (h *blockingHook) callsOf(id string) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.calls[id]...)
}

func (h *blockingHook) runsCalled() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls)
}

func (h *blockingHook) waitFirst(t *testing.T) string {
	t.Helper()
	select {
	case id := <-h.first:
		return id
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook was not called within 30 s")
		return ""
	}
}

func runState(t *testing.T, dbURL, runID string) (status string, attempt int) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), `SELECT status, attempt FROM task_runs WHERE id = $1`, runID).Scan(&status, &attempt); err != nil {
		t.Fatal(err)
	}
	return status, attempt
}

func hookTask(hook string) map[string]any {
	return map[string]any{
		"name": "slow hook", "schedule": "@every 1s", "overlap": "skip", "timeout_seconds": 120, "max_attempts": 3,
		"action": map[string]any{"type": "webhook", "url": hook},
	}
}

// TestKilledNodesRunIsRetriedElsewhere: a replica is SIGKILLed while it
// runs a task's job; a live replica retries that run within ~30 s and the
// task (overlap skip) keeps getting its ticks.
func TestKilledNodesRunIsRetriedElsewhere(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	hook := newBlockingHook(t)
	doomed := startProcess(t, dbURL, "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=true")
	token, _ := registerUserAt(t, doomed.URL, "kill@example.com")
	taskID := createTask(t, doomed.URL, token, hookTask(hook.URL))
	runID := hook.waitFirst(t) // running on the doomed replica, the only one

	cfg := testConfig(t, dbURL)
	cfg.WebhookPrivate = true
	live := startServer(t, cfg)
	doomed.signal(t, syscall.SIGKILL)
	killed := time.Now()
	_ = doomed.wait(t, 10*time.Second)
	hook.Release()

	testwait.For(t, 45*time.Second, "the run to be retried", func() bool { return len(hook.callsOf(runID)) >= 2 })
	took := time.Since(killed)
	t.Logf("run retried on the live replica %s after the kill", took.Round(100*time.Millisecond))
	if took > 30*time.Second {
		t.Fatalf("retry took %s, want within ~30 s", took)
	}
	testwait.For(t, 15*time.Second, "the retried run to succeed", func() bool {
		status, attempt := runState(t, dbURL, runID)
		return status == "succeeded" && attempt == 2
	})
	calledBefore := hook.runsCalled()
	testwait.For(t, 15*time.Second, "the task's next ticks to run", func() bool { return hook.runsCalled() >= calledBefore+2 })
	_, run := call(t, http.MethodGet, live.URL+"/v1/runs/"+runID, nil, token)
	if run["task_id"] != taskID || run["status"] != "succeeded" {
		t.Fatalf("run through the API: %v", run)
	}
	// Both attempts are recorded: the one the kill cut short, then the retry.
	_, attempts := call(t, http.MethodGet, live.URL+"/v1/runs/"+runID+"/attempts", nil, token)
	items, _ := attempts["items"].([]any)
	if len(items) != 2 || items[0].(map[string]any)["status"] != "interrupted" || items[0].(map[string]any)["finished_at"] == nil ||
		items[1].(map[string]any)["status"] != "succeeded" {
		t.Fatalf("attempts through the API: %v", attempts)
	}
}

// TestSIGTERMLetsTheRunningJobFinish: after SIGTERM the replica fails
// readiness at once but keeps its running job until it ends, then exits 0
// and deregisters; nobody else runs that job.
func TestSIGTERMLetsTheRunningJobFinish(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	hook := newBlockingHook(t)
	p := startProcess(t, dbURL, "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=true")
	node := p.nodeID(t, dbURL)
	token, _ := registerUserAt(t, p.URL, "term@example.com")
	createTask(t, p.URL, token, hookTask(hook.URL))
	runID := hook.waitFirst(t)

	p.signal(t, syscall.SIGTERM)
	testwait.For(t, 5*time.Second, "readiness to fail", func() bool {
		res, err := http.Get(p.URL + "/healthz/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusServiceUnavailable
	})
	if status, _ := runState(t, dbURL, runID); status != "running" {
		t.Fatalf("run while the replica drains: %s", status)
	}
	if countNodes(t, dbURL, node) != 1 {
		t.Fatal("deregistered while a job still runs")
	}
	hook.Release()
	if err := p.wait(t, 20*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if status, attempt := runState(t, dbURL, runID); status != "succeeded" || attempt != 1 || len(hook.callsOf(runID)) != 1 {
		t.Fatalf("run after a graceful stop: %s, attempt %d, %d calls", status, attempt, len(hook.callsOf(runID)))
	}
	if countNodes(t, dbURL, node) != 0 {
		t.Fatal("still registered after exiting")
	}
}

// registerUserAt registers through a base URL (an OS-process replica).
func registerUserAt(t *testing.T, base, email string) (token, id string) {
	t.Helper()
	status, body := call(t, http.MethodPost, base+"/v1/auth/register", map[string]string{"email": email, "password": "correct horse"}, "")
	if status != http.StatusCreated {
		t.Fatalf("register %s: %d %v", email, status, body)
	}
	return body["token"].(string), body["user"].(map[string]any)["id"].(string)
}
