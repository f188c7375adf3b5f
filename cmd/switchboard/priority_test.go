package main

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// gatedHook is a webhook target that records the order of its calls by run
// id and holds each call until released.
type gatedHook struct {
	*httptest.Server
	mu      sync.Mutex
	order   []string
	release chan struct{}
}

func newGatedHook(t *testing.T) *gatedHook {
	h := &gatedHook{release: make(chan struct{}, 100)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.order = append(h.order, r.Header.Get("webhook-id"))
		h.mu.Unlock()
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() { close(h.release); h.Close() })
	return h
}

func (h *gatedHook) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.order)
}

// TestPriorityRunsFirstWhenWorkersAreBusy: one replica with one run worker,
// busy with a run; five runs of a priority-4 task queue behind it, then one
// triggered with priority 1. When the worker frees, the priority-1 run
// starts first; the priority-4 runs follow in the order they were made.
func TestPriorityRunsFirstWhenWorkersAreBusy(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, dbtest.NewDatabaseURL(t))
	cfg.WebhookPrivate, cfg.RunWorkers = true, 1
	srv := startServer(t, cfg)
	hook := newGatedHook(t)
	token, _ := registerUser(t, srv, "priority@example.com")
	taskID := createTask(t, srv.URL, token, map[string]any{
		"name": "reports", "overlap": "allow", "priority": 4, "action": map[string]any{"type": "webhook", "url": hook.URL},
	})
	trigger := func(body map[string]any) map[string]any {
		status, run := call(t, http.MethodPost, srv.URL+"/v1/tasks/"+taskID+"/runs", body, token)
		if status != http.StatusAccepted {
			t.Fatalf("trigger: %d %v", status, run)
		}
		return run
	}
	busy := trigger(map[string]any{})
	testwait.For(t, 15*time.Second, "the first run to occupy the worker", func() bool { return len(hook.calls()) == 1 })
	var low []string
	for range 5 {
		run := trigger(map[string]any{})
		if run["priority"] != 4.0 {
			t.Fatalf("a run of a priority-4 task has priority %v", run["priority"])
		}
		low = append(low, run["id"].(string))
	}
	urgent := trigger(map[string]any{"priority": 1})
	if urgent["priority"] != 1.0 {
		t.Fatalf("the urgent run has priority %v", urgent["priority"])
	}
	for n := 2; n <= 7; n++ {
		hook.release <- struct{}{}
		testwait.For(t, 15*time.Second, "the next run to start", func() bool { return len(hook.calls()) == n })
	}
	hook.release <- struct{}{}
	want := append([]string{busy["id"].(string), urgent["id"].(string)}, low...)
	if got := hook.calls(); !slices.Equal(got, want) {
		t.Fatalf("runs started in the order %v, want %v (the priority-1 run second)", got, want)
	}
}
