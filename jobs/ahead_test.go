package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// aheadBundle is setup with a River client that has InsertAvailable, and a
// claimer with a lead of MaxLead: a task due in a second or two is claimed
// ahead.
func aheadBundle(t *testing.T) (*testBundle, *Claimer) {
	t.Helper()
	b := setup(t)
	client, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{Middleware: []rivertype.Middleware{&InsertAvailable{}}})
	if err != nil {
		t.Fatal(err)
	}
	b.river = client
	return b, NewClaimer(ClaimerOptions{DB: b.pool, River: client, Pacing: Pacing{Lead: MaxLead}})
}

// aheadTask is an overlap-allow task whose next tick is two seconds away.
func (b *testBundle) aheadTask(t *testing.T, mods ...func(*Task)) (Task, time.Time) {
	t.Helper()
	task := b.task(t, append([]func(*Task){func(t *Task) { t.Overlap = OverlapAllow; t.Schedule = new("@every 1h") }}, mods...)...)
	tick := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	b.dueAt(t, task.ID, tick)
	return task, tick
}

// claimAhead claims the task's tick ahead and returns its run.
func (b *testBundle) claimAhead(t *testing.T, c *Claimer, taskID string, tick time.Time) Run {
	t.Helper()
	if n, err := c.ClaimOnce(context.Background()); n != 1 || err != nil {
		t.Fatalf("ClaimOnce = %d, %v; want the tick claimed ahead", n, err)
	}
	runs := b.runs(t, taskID)
	if len(runs) != 1 || !runs[0].ScheduledFor.Equal(tick) || runs[0].Status != StatusQueued {
		t.Fatalf("runs = %+v, want one queued for %v", runs, tick)
	}
	return runs[0]
}

func (b *testBundle) jobState(t *testing.T, runID string) (state string, at time.Time) {
	t.Helper()
	err := b.pool.QueryRow(context.Background(), `
		SELECT state::text, scheduled_at FROM river_job WHERE args @> jsonb_build_object('run_id', $1::text)`, runID).Scan(&state, &at)
	if err != nil {
		t.Fatal(err)
	}
	return state, at
}

func TestClaimAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("an allow task's tick within the lead is claimed, its job available at the tick", func(t *testing.T) {
		t.Parallel()
		b, c := aheadBundle(t)
		task, tick := b.aheadTask(t)
		run := b.claimAhead(t, c, task.ID, tick)
		if state, at := b.jobState(t, run.ID); state != "available" || !at.Equal(tick) {
			t.Fatalf("job %s at %v, want available at the tick %v (fetchable once due, not before)", state, at, tick)
		}
		if got := b.get(t, task.ID); !got.NextRunAt.After(tick.Add(time.Hour-time.Second)) || got.RunCount != 1 {
			t.Fatalf("task next %v run_count %d, want advanced past the claimed tick", got.NextRunAt, got.RunCount)
		}
		if due, _, err := DueStats(ctx, b.pool); due != 0 || err != nil {
			t.Fatalf("DueStats = %d, %v; a tick claimed ahead is not due backlog", due, err)
		}
	})

	t.Run("a tick of a skip, buffer_one or cancel_other task waits until due", func(t *testing.T) {
		t.Parallel()
		b, c := aheadBundle(t)
		for _, o := range []string{OverlapSkip, "buffer_one", OverlapCancelOther} {
			b.aheadTask(t, func(t *Task) { t.Overlap = o })
		}
		if n, err := c.ClaimOnce(ctx); n != 0 || err != nil {
			t.Fatalf("ClaimOnce = %d, %v; their overlap is decided as of the tick", n, err)
		}
	})

	t.Run("without InsertAvailable the claim rolls back and the lead is off", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river, Pacing: Pacing{Lead: MaxLead}})
		task, tick := b.aheadTask(t)
		if n, err := c.ClaimOnce(ctx); n != 0 || err == nil {
			t.Fatalf("ClaimOnce = %d, %v; want an error (its job would wait for River's scheduler)", n, err)
		}
		if got := b.get(t, task.ID); !got.NextRunAt.Equal(tick) || len(b.runs(t, task.ID)) != 0 {
			t.Fatalf("task next %v, runs %d: the claim did not roll back", got.NextRunAt, len(b.runs(t, task.ID)))
		}
		if n, err := c.ClaimOnce(ctx); n != 0 || err != nil {
			t.Fatalf("second ClaimOnce = %d, %v; want nothing claimed before the tick", n, err)
		}
	})
}

// TestWithdrawAhead: a task changed between its tick's claim ahead and the
// tick has the tick decided with the change, as if not yet claimed.
func TestWithdrawAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("paused in the lead window: the tick does not run", func(t *testing.T) {
		t.Parallel()
		b, c := aheadBundle(t)
		task, tick := b.aheadTask(t)
		b.claimAhead(t, c, task.ID, tick)
		if _, err := UpdateTask(ctx, b.pool, b.project, task.ID, TaskPatch{Active: new(false)}, false); err != nil {
			t.Fatal(err)
		}
		if runs := b.runs(t, task.ID); len(runs) != 0 {
			t.Fatalf("runs = %+v, want the withdrawn tick gone", runs)
		}
		if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'task_run'`); n != 0 {
			t.Fatalf("%d task_run jobs left, want 0", n)
		}
		if got := b.get(t, task.ID); got.RunCount != 0 || got.NextRunAt != nil {
			t.Fatalf("paused task run_count %d next %v", got.RunCount, got.NextRunAt)
		}
	})

	// The same tick is claimed anew: the withdrawn run is gone, not merely
	// cancelled (its row would hold the tick's unique slot).
	t.Run("edited in the lead window: the tick is claimed again with the edit", func(t *testing.T) {
		t.Parallel()
		b, c := aheadBundle(t)
		task, tick := b.aheadTask(t)
		first := b.claimAhead(t, c, task.ID, tick)
		if _, err := UpdateTask(ctx, b.pool, b.project, task.ID, TaskPatch{MaxAttempts: new(7)}, false); err != nil {
			t.Fatal(err)
		}
		if got := b.get(t, task.ID); !got.NextRunAt.Equal(tick) || got.RunCount != 0 {
			t.Fatalf("task next %v run_count %d, want the tick due again", got.NextRunAt, got.RunCount)
		}
		run := b.claimAhead(t, c, task.ID, tick)
		if n, attempts := b.jobsFor(t, run.ID); run.ID == first.ID || n != 1 || attempts != 7 {
			t.Fatalf("run %s (first %s): %d jobs with max_attempts %d, want a new run with the edit", run.ID, first.ID, n, attempts)
		}
	})

	t.Run("deactivated (410 Gone) in the lead window: the tick does not run", func(t *testing.T) {
		t.Parallel()
		b, c := aheadBundle(t)
		task, tick := b.aheadTask(t)
		b.claimAhead(t, c, task.ID, tick)
		if err := DeactivateTask(ctx, b.pool, task.ID); err != nil {
			t.Fatal(err)
		}
		if runs := b.runs(t, task.ID); len(runs) != 0 {
			t.Fatalf("runs = %+v, want the withdrawn tick gone", runs)
		}
	})

	t.Run("a job already fetched is not withdrawn", func(t *testing.T) {
		t.Parallel()
		b, c := aheadBundle(t)
		task, tick := b.aheadTask(t)
		run := b.claimAhead(t, c, task.ID, tick)
		// As a producer's fetch leaves it once the tick came.
		if _, err := b.pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1 WHERE kind = 'task_run'`); err != nil {
			t.Fatal(err)
		}
		if _, err := UpdateTask(ctx, b.pool, b.project, task.ID, TaskPatch{Active: new(false)}, false); err != nil {
			t.Fatal(err)
		}
		if runs := b.runs(t, task.ID); len(runs) != 1 || runs[0].ID != run.ID {
			t.Fatalf("runs = %+v, want the fetched run kept", runs)
		}
	})
}

// TestClaimLoopWakesAhead: the loop wakes Lead before an allow task's tick
// (not at the tick) and claims it then.
func TestClaimLoopWakesAhead(t *testing.T) {
	t.Parallel()
	b, _ := aheadBundle(t)
	c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river, Pacing: Pacing{Lead: 2 * time.Second, StartJitter: time.Millisecond}})
	task := b.task(t, func(t *Task) { t.Overlap = OverlapAllow; t.Schedule = new("@every 1h") })
	tick := time.Now().Add(3500 * time.Millisecond).Truncate(time.Millisecond)
	b.dueAt(t, task.ID, tick)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	testwait.For(t, 30*time.Second, "the tick to be claimed", func() bool { return len(b.runs(t, task.ID)) == 1 })
	if run := b.runs(t, task.ID)[0]; !run.CreatedAt.Before(tick) {
		t.Fatalf("run for %v created at %v: claimed at its tick, not ahead", tick, run.CreatedAt)
	}
}
