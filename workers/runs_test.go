package workers

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/jobs"
)

func TestRunWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("2xx succeeds and records the response", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowPrivate: true})
		hook := newHookServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(strings.Repeat("r", 5000)))
		})
		task := b.task(t, webhook(hook.URL))
		run := b.trigger(t, task.ID)
		got := b.waitRun(t, run.ID, 10*time.Second)
		if got.Status != jobs.StatusSucceeded || *got.HTTPStatus != 201 || got.Attempt != 1 || got.Error != nil ||
			len(*got.ResponseExcerpt) != ExcerptLimit || got.DurationMS == nil || got.StartedAt == nil {
			t.Fatalf("run: %+v", got)
		}
		var body map[string]any
		if err := json.Unmarshal(hook.requests()[0].body, &body); err != nil || body["run_id"] != run.ID || body["task_id"] != task.ID || body["trigger"] != "manual" {
			t.Fatalf("default body: %s (%v)", hook.requests()[0].body, err)
		}
		testwait.For(t, 5*time.Second, "events", func() bool { return len(b.pub.runEvents(run.ID)) == 2 })
		if ev := strings.Join(b.pub.runEvents(run.ID), " "); ev != "task.run.running task.run.succeeded" {
			t.Fatalf("events: %s", ev)
		}
		project := personal(t, b.pool, b.owner)
		for _, e := range b.pub.events {
			if e.project != project || e.user != "" {
				t.Fatalf("event %s went to project %q user %q, not the task's project", e.name, e.project, e.user)
			}
		}
	})

	t.Run("publish action sends the event to the owner or a room", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		toOwner := b.task(t, jobs.Action{Type: jobs.ActionPublish, Event: "report.ready", Payload: []byte(`{"rows":3}`)})
		toRoom := b.task(t, jobs.Action{Type: jobs.ActionPublish, Event: "standup", Room: "team"})
		r1, r2 := b.trigger(t, toOwner.ID), b.trigger(t, toRoom.ID)
		if b.waitRun(t, r1.ID, 10*time.Second).Status != jobs.StatusSucceeded || b.waitRun(t, r2.ID, 10*time.Second).Status != jobs.StatusSucceeded {
			t.Fatal("publish runs did not succeed")
		}
		var owner, room bool
		b.pub.mu.Lock()
		for _, e := range b.pub.events {
			if e.name == "report.ready" && e.user == b.owner && string(e.payload.(json.RawMessage)) == `{"rows": 3}` {
				owner = true
			}
			if e.name == "standup" && e.room == "team" && e.payload == nil {
				room = true
			}
		}
		b.pub.mu.Unlock()
		if !owner || !room {
			t.Fatalf("published events: %+v", b.pub.events)
		}
	})

	t.Run("a publish to a members-only room the owner is not in fails, unretried", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{rooms: membersOf{"vault": nil}})
		task := b.task(t, jobs.Action{Type: jobs.ActionPublish, Event: "leak", Room: "vault"}, func(t *jobs.Task) { t.MaxAttempts = 3 })
		got := b.waitRun(t, b.trigger(t, task.ID).ID, 10*time.Second)
		if got.Status != jobs.StatusFailed || got.Attempt != 1 || got.Error == nil || !strings.Contains(*got.Error, "members only") {
			t.Fatalf("run: %+v", got)
		}
		b.pub.mu.Lock()
		defer b.pub.mu.Unlock()
		for _, e := range b.pub.events {
			if e.room != "" {
				t.Fatalf("published to a room: %+v", e)
			}
		}
	})

	t.Run("retries with backoff, then succeeds", func(t *testing.T) {
		t.Parallel()
		const base = 300 * time.Millisecond
		b := setup(t, setupOpts{allowPrivate: true, backoff: func(n int) time.Duration { return base * time.Duration(n) }})
		hook := newHookServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n < 2 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
			}
		})
		task := b.task(t, webhook(hook.URL), func(t *jobs.Task) { t.MaxAttempts = 3 })
		run := b.trigger(t, task.ID)
		got := b.waitRun(t, run.ID, 15*time.Second)
		if got.Status != jobs.StatusSucceeded || got.Attempt != 3 || *got.HTTPStatus != 200 {
			t.Fatalf("run: %+v", got)
		}
		hits := hook.requests()
		if len(hits) != 3 {
			t.Fatalf("%d requests, want 3", len(hits))
		}
		for i := 1; i < 3; i++ {
			if gap := hits[i].at.Sub(hits[i-1].at); gap < base*time.Duration(i) {
				t.Errorf("retry %d came after %v, want at least %v", i, gap, base*time.Duration(i))
			}
		}
		testwait.For(t, 5*time.Second, "events", func() bool { return len(b.pub.runEvents(run.ID)) == 6 })
		want := "task.run.running task.run.queued task.run.running task.run.queued task.run.running task.run.succeeded"
		if ev := strings.Join(b.pub.runEvents(run.ID), " "); ev != want {
			t.Fatalf("events: %s", ev)
		}
	})

	t.Run("Retry-After is honoured", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowPrivate: true})
		hook := newHookServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 0 {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		run := b.trigger(t, b.task(t, webhook(hook.URL)).ID)
		if got := b.waitRun(t, run.ID, 15*time.Second); got.Status != jobs.StatusSucceeded {
			t.Fatalf("run: %+v", got)
		}
		hits := hook.requests()
		if gap := hits[1].at.Sub(hits[0].at); gap < 2*time.Second {
			t.Fatalf("retried after %v despite Retry-After: 2", gap)
		}
	})

	t.Run("fails after max_attempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowPrivate: true})
		hook := newHookServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusBadGateway) })
		run := b.trigger(t, b.task(t, webhook(hook.URL), func(t *jobs.Task) { t.MaxAttempts = 2 }).ID)
		got := b.waitRun(t, run.ID, 10*time.Second)
		if got.Status != jobs.StatusFailed || got.Attempt != 2 || *got.HTTPStatus != 502 || !strings.Contains(*got.Error, "502") || !strings.HasPrefix(*got.ResponseExcerpt, "down") {
			t.Fatalf("run: %+v", got)
		}
		if n := len(hook.requests()); n != 2 {
			t.Fatalf("%d requests, want 2", n)
		}
	})

	t.Run("410 deactivates the task without retrying", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowPrivate: true})
		hook := newHookServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
		task := b.task(t, webhook(hook.URL), func(t *jobs.Task) { t.MaxAttempts = 5 })
		got := b.waitRun(t, b.trigger(t, task.ID).ID, 10*time.Second)
		if got.Status != jobs.StatusFailed || got.HTTPStatus == nil || *got.HTTPStatus != 410 || got.Attempt != 1 {
			t.Logf("error: %v", *got.Error)
			t.Fatalf("run: %+v", got)
		}
		after, err := jobs.GetTask(ctx, b.pool, personal(t, b.pool, b.owner), task.ID)
		if err != nil || after.Active || after.NextRunAt != nil {
			t.Fatalf("task after 410: active %v next %v (%v)", after.Active, after.NextRunAt, err)
		}
		if n := len(hook.requests()); n != 1 {
			t.Fatalf("%d requests, want 1", n)
		}
	})

	t.Run("a 4xx other than 408 and 429 is not retried", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowPrivate: true})
		hook := newHookServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) })
		got := b.waitRun(t, b.trigger(t, b.task(t, webhook(hook.URL)).ID).ID, 10*time.Second)
		if got.Status != jobs.StatusFailed || got.Attempt != 1 || len(hook.requests()) != 1 {
			t.Fatalf("run: %+v after %d requests", got, len(hook.requests()))
		}
	})

	t.Run("timeout_seconds bounds an attempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowPrivate: true})
		hook := newHookServer(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		})
		task := b.task(t, webhook(hook.URL), func(t *jobs.Task) { t.TimeoutSeconds = 1; t.MaxAttempts = 2 })
		got := b.waitRun(t, b.trigger(t, task.ID).ID, 15*time.Second)
		if got.Status != jobs.StatusFailed || got.Attempt != 2 || *got.Error != "timed out after 1s" || *got.DurationMS < 1000 || *got.DurationMS > 5000 {
			t.Fatalf("run: %+v (error %v)", got, *got.Error)
		}
	})

	t.Run("a refused target fails without retrying", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowPrivate: false})
		hook := newHookServer(t, func(int, http.ResponseWriter, *http.Request) {})
		got := b.waitRun(t, b.trigger(t, b.task(t, webhook(hook.URL), func(t *jobs.Task) { t.MaxAttempts = 3 }).ID).ID, 10*time.Second)
		if got.Status != jobs.StatusFailed || got.Attempt != 1 || !strings.Contains(*got.Error, "loopback") || len(hook.requests()) != 0 {
			t.Fatalf("run: %+v (error %v) after %d requests", got, *got.Error, len(hook.requests()))
		}
	})

	t.Run("a deleted task's queued job does nothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowPrivate: true})
		hook := newHookServer(t, func(int, http.ResponseWriter, *http.Request) {})
		task := b.task(t, webhook(hook.URL))
		run := b.trigger(t, task.ID)
		if err := jobs.DeleteTask(ctx, b.pool, personal(t, b.pool, b.owner), task.ID); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 10*time.Second, "the job to complete", func() bool {
			var state string
			_ = b.pool.QueryRow(ctx, `SELECT state FROM river_job WHERE args->>'run_id' = $1`, run.ID).Scan(&state)
			return state == "completed"
		})
		if n := len(hook.requests()); n > 1 {
			t.Fatalf("%d requests for a deleted task", n)
		}
	})
}

// membersOf is a RoomAccess over fixed rooms: a listed room is members-only
// with those members; any other room is open.
type membersOf map[string][]string

func (m membersOf) CanUseRoom(_ context.Context, room, user string) (bool, error) {
	members, ok := m[room]
	return !ok || slices.Contains(members, user), nil
}
