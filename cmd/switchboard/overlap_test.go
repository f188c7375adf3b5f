package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// concurrencyHook holds each call for hold (or until the caller goes away)
// and records how many calls were in flight at most, and the order runs
// were first called in.
type concurrencyHook struct {
	*httptest.Server
	mu       sync.Mutex
	inFlight int
	peak     int
	order    []string
	aborted  map[string]bool
	done     map[string]bool
}

func newConcurrencyHook(t *testing.T, hold time.Duration) *concurrencyHook {
	h := &concurrencyHook{aborted: map[string]bool{}, done: map[string]bool{}}
	stop := make(chan struct{})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("webhook-id")
		h.mu.Lock()
		h.inFlight++
		h.peak = max(h.peak, h.inFlight)
		h.order = append(h.order, id)
		h.mu.Unlock()
		timer := time.NewTimer(hold) // the target's own work, not a test wait
		defer timer.Stop()
		select {
		case <-timer.C:
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
		case <-stop:
		}
		h.mu.Lock()
		h.inFlight--
		if r.Context().Err() != nil {
			h.aborted[id] = true
		} else {
			h.done[id] = true
		}
		h.mu.Unlock()
	}))
	t.Cleanup(func() {
		close(stop)
		h.Close()
	})
	return h
}

func (h *concurrencyHook) stats() (peak int, order []string, aborted, done int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak, append([]string(nil), h.order...), len(h.aborted), len(h.done)
}

// TestMaxConcurrencyAcrossReplicas: 8 runs of a max_concurrency 2 task,
// triggered over three replicas: the target never sees a third call at
// once, the runs start in the order they were made, and none spends more
// than one attempt waiting.
func TestMaxConcurrencyAcrossReplicas(t *testing.T) {
	t.Parallel()
	servers, dbURL := startReplicas(t, 3)
	hook := newConcurrencyHook(t, 400*time.Millisecond)
	token, _ := registerUser(t, servers[0], "limit@example.com")
	taskID := createTask(t, servers[0].URL, token, map[string]any{
		"name": "limited", "overlap": "allow", "max_concurrency": 2, "max_attempts": 1,
		"action": map[string]any{"type": "webhook", "url": hook.URL},
	})
	var made []string
	for i := range 8 {
		status, run := call(t, http.MethodPost, servers[i%3].URL+"/v1/tasks/"+taskID+"/runs", nil, token)
		if status != http.StatusAccepted {
			t.Fatalf("trigger %d: %d %v", i, status, run)
		}
		made = append(made, run["id"].(string))
	}
	testwait.For(t, 60*time.Second, "every run to succeed", func() bool {
		return dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND status = 'succeeded'`, taskID) == len(made)
	})
	peak, _, _, done := hook.stats()
	t.Logf("peak concurrent calls at the target: %d of %d runs", peak, done)
	if peak != 2 {
		t.Fatalf("peak concurrency at the target %d, want 2", peak)
	}
	if n := dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND attempt <> 1`, taskID); n != 0 {
		t.Fatalf("%d runs spent more than one attempt", n)
	}
	// Admission is in order; two calls admitted together may reach the
	// target in either order, so compare the order runs were marked running.
	for i, id := range made {
		if rank := dbCount(t, dbURL, `
			SELECT count(*) FROM task_runs r, task_runs me
			WHERE me.id = $2 AND r.task_id = $1 AND r.started_at < me.started_at`, taskID, id); rank != i {
			t.Fatalf("run %d (%s) started as number %d", i, id, rank)
		}
	}
}

// TestBufferOneUnderTicks: a task ticking every second whose call takes
// 2.5 s: the target never sees two calls at once, at most one run waits
// behind the running one, the waiting run starts when it finishes, and the
// other ticks are skipped and counted.
func TestBufferOneUnderTicks(t *testing.T) {
	t.Parallel()
	servers, dbURL := startReplicas(t, 3)
	hook := newConcurrencyHook(t, 2500*time.Millisecond)
	token, _ := registerUser(t, servers[0], "buffer@example.com")
	taskID := createTask(t, servers[0].URL, token, map[string]any{
		"name": "buffered", "schedule": "@every 1s", "overlap": "buffer_one",
		"action": map[string]any{"type": "webhook", "url": hook.URL},
	})
	maxWaiting := 0
	testwait.For(t, 30*time.Second, "three buffered runs to succeed", func() bool {
		maxWaiting = max(maxWaiting, dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND status = 'queued'`, taskID))
		if n := dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND status = 'running'`, taskID); n > 1 {
			t.Fatalf("%d runs running at once", n)
		}
		return dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND status = 'succeeded'`, taskID) >= 3
	})
	call(t, http.MethodPatch, servers[1].URL+"/v1/tasks/"+taskID, map[string]any{"active": false}, token)
	peak, _, _, _ := hook.stats()
	_, task := call(t, http.MethodGet, servers[2].URL+"/v1/tasks/"+taskID, nil, token)
	t.Logf("peak %d, at most %d waiting, %v ticks skipped", peak, maxWaiting, task["skipped_ticks"])
	if peak != 1 || maxWaiting > 1 {
		t.Fatalf("peak concurrency %d, at most %d runs waiting; want 1 and at most 1", peak, maxWaiting)
	}
	if skipped, _ := task["skipped_ticks"].(float64); skipped < 1 {
		t.Fatalf("skipped_ticks %v, want the ticks that found a run waiting", task["skipped_ticks"])
	}
}

// TestCancelOtherUnderTicks: a task ticking every second whose call never
// ends by itself: each tick cancels the running run (its call is aborted at
// the target) and starts the new one; never two runs running at once.
func TestCancelOtherUnderTicks(t *testing.T) {
	t.Parallel()
	servers, dbURL := startReplicas(t, 3)
	hook := newConcurrencyHook(t, time.Hour)
	token, _ := registerUser(t, servers[0], "cancelother@example.com")
	taskID := createTask(t, servers[0].URL, token, map[string]any{
		"name": "latest wins", "schedule": "@every 1s", "overlap": "cancel_other", "timeout_seconds": 600,
		"action": map[string]any{"type": "webhook", "url": hook.URL},
	})
	testwait.For(t, 30*time.Second, "three runs to be cancelled by newer ones", func() bool {
		if n := dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND status = 'running'`, taskID); n > 1 {
			t.Fatalf("%d runs running at once", n)
		}
		_, _, aborted, _ := hook.stats()
		return aborted >= 3
	})
	call(t, http.MethodPatch, servers[1].URL+"/v1/tasks/"+taskID, map[string]any{"active": false}, token)
	if n := dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND status = 'cancelled'`, taskID); n < 3 {
		t.Fatalf("%d runs cancelled", n)
	}
	if n := dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND status IN ('succeeded', 'failed')`, taskID); n != 0 {
		t.Fatalf("%d runs ended otherwise", n)
	}
}
