package main

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// heldHook is a webhook target that holds every call until the test ends
// (a slow customer endpoint) and counts the calls it holds.
type heldHook struct {
	*httptest.Server
	mu   sync.Mutex
	held int
}

func newHeldHook(t *testing.T) *heldHook {
	h := &heldHook{}
	release := make(chan struct{})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.held++
		h.mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() { close(release); h.Close() })
	return h
}

func (h *heldHook) calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// TestFairShareBetweenProjects: on two replicas of 20 run workers each,
// one project backfills 2 997 runs of a webhook whose calls never end
// while the test runs; another project's run, triggered once the first
// holds every worker it may, starts while every call of the first is
// still held, ahead of the 2 959 runs of the first still queued. First in,
// first out, it would wait for a worker the backlog holds: for ever here,
// for the target's timeout and every queued run before it in production.
func TestFairShareBetweenProjects(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	var servers []*testServer
	for range 2 {
		cfg := testConfig(t, dbURL)
		cfg.WebhookPrivate, cfg.RunWorkers = true, 20
		cfg.Quotas.BackfillTicks = 10_000 // the backlog is three backfills of 999: past the default quota
		servers = append(servers, startServer(t, cfg))
	}
	slow, quick := newHeldHook(t), newHookCalls(t)
	hog, _ := registerUser(t, servers[0], "backfiller@example.com")
	hogTask := createTask(t, servers[0].URL, hog, map[string]any{
		"name": "slow minutely", "schedule": "* * * * *", "overlap": "allow", "max_attempts": 1, "timeout_seconds": 600,
		"action": map[string]any{"type": "webhook", "url": slow.URL},
	})
	to := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	for i := range 3 {
		from := to.Add(-time.Duration(999*(3-i)) * time.Minute)
		status, body := call(t, http.MethodPost, servers[i%2].URL+"/v1/tasks/"+hogTask+"/backfill",
			map[string]any{"from": from, "to": from.Add(999 * time.Minute)}, hog)
		if status != http.StatusAccepted || body["created"] != 999.0 {
			t.Fatalf("backfill %d: %d %v", i, status, body)
		}
	}
	// Each replica keeps its reserve (one worker of 20) for projects within
	// their share, so the backlog holds 19 calls on each.
	testwait.For(t, 60*time.Second, "the backlog to hold 38 workers", func() bool { return slow.calls() >= 38 })

	user, _ := registerUser(t, servers[1], "neighbour@example.com")
	task := createTask(t, servers[1].URL, user, map[string]any{
		"name": "quick", "max_attempts": 1, "action": map[string]any{"type": "webhook", "url": quick.URL},
	})
	triggered := time.Now()
	status, run := call(t, http.MethodPost, servers[1].URL+"/v1/tasks/"+task+"/runs", nil, user)
	if status != http.StatusAccepted {
		t.Fatalf("trigger: %d %v", status, run)
	}
	runID := run["id"].(string)
	testwait.For(t, 30*time.Second, "the other project's run to reach its target while the backlog holds every other worker", func() bool {
		return len(quick.of(runID)) > 0
	})
	delay := quick.of(runID)[0].Sub(triggered)
	held := slow.calls()
	queued := dbCount(t, dbURL, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND status = 'queued'`, hogTask)
	t.Logf("the other project's run reached its target %v after its trigger; %d of the backlog's calls held, %d runs queued", delay, held, queued)
	if held > 38 || queued < 2997-38 {
		t.Fatalf("the backlog held %d calls (%d runs queued): it took the reserve", held, queued)
	}
}
