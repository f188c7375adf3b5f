package jobs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/infra/testkit/startstoptest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

func TestClaimOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("claims a due task, advances it and enqueues its run", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.MaxAttempts = 7 })
		due := time.Now().Add(-500 * time.Millisecond).Truncate(time.Second)
		b.dueAt(t, task.ID, due)
		c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
		n, err := c.ClaimOnce(ctx)
		if err != nil || n != 1 {
			t.Fatalf("ClaimOnce = %d, %v; want 1", n, err)
		}
		runs := b.runs(t, task.ID)
		if len(runs) != 1 || runs[0].Status != StatusQueued || runs[0].Trigger != TriggerSchedule || !runs[0].ScheduledFor.Equal(due) {
			t.Fatalf("runs = %+v, want one queued schedule run for %v", runs, due)
		}
		if n, attempts := b.jobsFor(t, runs[0].ID); n != 1 || attempts != 7 {
			t.Fatalf("river jobs = %d with max_attempts %d, want 1 with 7", n, attempts)
		}
		got := b.get(t, task.ID)
		if !got.NextRunAt.Equal(due.Add(time.Second)) || got.RunCount != 1 || got.LastRunAt == nil {
			t.Fatalf("task after claim: next %v run_count %d last %v", got.NextRunAt, got.RunCount, got.LastRunAt)
		}
		if n, _ := c.ClaimOnce(ctx); n != 0 && got.NextRunAt.After(time.Now()) {
			t.Fatalf("claimed %d tasks that are not due", n)
		}
	})

	t.Run("leaves tasks that are not due or inactive", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		inactive := b.task(t, func(t *Task) { t.Active = false })
		if inactive.NextRunAt != nil {
			t.Fatalf("inactive task has next_run_at %v", inactive.NextRunAt)
		}
		if n, err := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river}).ClaimOnce(ctx); n != 0 || err != nil {
			t.Fatalf("ClaimOnce = %d, %v; want 0", n, err)
		}
	})

	t.Run("overlap skip inserts nothing while a run is active", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t)
		c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
		b.dueAt(t, task.ID, time.Now().Add(-time.Second))
		if _, err := c.ClaimOnce(ctx); err != nil {
			t.Fatal(err)
		}
		// The second claim's batch also holds a task whose tick runs: each
		// task is counted by its own outcome.
		other := b.task(t)
		due := time.Now().Add(-time.Second)
		b.dueAt(t, task.ID, due)
		b.dueAt(t, other.ID, due)
		if n, err := c.ClaimOnce(ctx); n != 2 || err != nil {
			t.Fatalf("second claim = %d, %v", n, err)
		}
		if runs := b.runs(t, task.ID); len(runs) != 1 {
			t.Fatalf("%d runs, want 1 (the first still queued)", len(runs))
		}
		// Advanced past the skipped tick (measured from it, not from a
		// clock a loaded machine lets run on).
		if got := b.get(t, task.ID); got.SkippedTicks != 1 || got.RunCount != 1 || got.NextRunAt == nil || !got.NextRunAt.After(due) {
			t.Fatalf("skipped_ticks %d run_count %d next %v: want 1, 1 and advanced", got.SkippedTicks, got.RunCount, got.NextRunAt)
		}
		if got := b.get(t, other.ID); got.SkippedTicks != 0 || got.RunCount != 1 || got.LastRunAt == nil || len(b.runs(t, other.ID)) != 1 {
			t.Fatalf("the other task: skipped_ticks %d run_count %d last %v: want 0, 1 and set, with its run", got.SkippedTicks, got.RunCount, got.LastRunAt)
		}
	})

	t.Run("overlap allow inserts a run each tick", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Overlap = OverlapAllow })
		c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
		for i := range 3 {
			b.dueAt(t, task.ID, time.Now().Add(-time.Duration(i+1)*time.Second))
			if _, err := c.ClaimOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if runs := b.runs(t, task.ID); len(runs) != 3 {
			t.Fatalf("%d runs, want 3", len(runs))
		}
	})

	t.Run("ticks missed while nothing ran produce one run", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t)
		due := time.Now().Add(-time.Hour).Truncate(time.Second)
		b.dueAt(t, task.ID, due)
		if n, err := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river}).ClaimOnce(ctx); n != 1 || err != nil {
			t.Fatalf("ClaimOnce = %d, %v", n, err)
		}
		runs := b.runs(t, task.ID)
		if len(runs) != 1 || !runs[0].ScheduledFor.Equal(due) {
			t.Fatalf("runs = %+v, want one for %v", runs, due)
		}
		if runs[0].SkippedTicks < 3590 || runs[0].SkippedTicks > 3610 {
			t.Fatalf("skipped_ticks = %d, want about 3600", runs[0].SkippedTicks)
		}
		got := b.get(t, task.ID)
		if got.SkippedTicks != int64(runs[0].SkippedTicks) || !got.NextRunAt.After(time.Now().Add(-2*time.Second)) {
			t.Fatalf("task skipped_ticks %d next %v", got.SkippedTicks, got.NextRunAt)
		}
	})

	t.Run("a late tick within the catch-up window keeps its own run", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Overlap = OverlapAllow })
		due := time.Now().Add(-3 * time.Second).Truncate(time.Second)
		b.dueAt(t, task.ID, due)
		c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
		for range 3 {
			if _, err := c.ClaimOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		runs := b.runs(t, task.ID)
		if len(runs) != 3 {
			t.Fatalf("%d runs, want 3", len(runs))
		}
		for i, r := range runs { // newest first
			if want := due.Add(time.Duration(2-i) * time.Second); !r.ScheduledFor.Equal(want) || r.SkippedTicks != 0 {
				t.Fatalf("run %d for %v skipped %d, want %v skipped 0", i, r.ScheduledFor, r.SkippedTicks, want)
			}
		}
	})

	t.Run("killed between claim and commit: claimed again next tick", func(t *testing.T) {
		t.Parallel()
		for _, kill := range []struct {
			name string
			die  func(ctx context.Context, cancel context.CancelFunc, tx pgx.Tx) error
		}{
			{"context cancelled", func(_ context.Context, cancel context.CancelFunc, _ pgx.Tx) error {
				cancel()
				return context.Canceled
			}},
			{"connection terminated", func(ctx context.Context, _ context.CancelFunc, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
				return errors.Join(errors.New("backend terminated"), err)
			}},
		} {
			t.Run(kill.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				task := b.task(t)
				due := time.Now().Add(-200 * time.Millisecond).Truncate(time.Second)
				b.dueAt(t, task.ID, due)
				dctx, cancel := context.WithCancel(ctx)
				defer cancel()
				dying := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
				dying.beforeCommit = func(ctx context.Context, tx pgx.Tx) error { return kill.die(ctx, cancel, tx) }
				if n, err := dying.ClaimOnce(dctx); err == nil || n != 0 {
					t.Fatalf("dying claim = %d, %v; want an error", n, err)
				}
				if got := b.get(t, task.ID); !got.NextRunAt.Equal(due) || got.RunCount != 0 {
					t.Fatalf("after the crash: next %v run_count %d; want %v and 0", got.NextRunAt, got.RunCount, due)
				}
				if n := b.count(t, `SELECT count(*) FROM task_runs`) + b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'task_run'`); n != 0 {
					t.Fatalf("%d runs or jobs survived the crash", n)
				}
				// The terminated backend releases the task's row lock as it
				// exits, a moment after its client saw the error: until then
				// a claim skips the row (SKIP LOCKED), as the claim loop's
				// next look 20 ms later would.
				next := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
				testwait.For(t, 10*time.Second, "the next claim to take the task", func() bool {
					n, err := next.ClaimOnce(ctx)
					if err != nil || n > 1 {
						t.Fatalf("next claim = %d, %v; want the task", n, err)
					}
					return n == 1
				})
				if runs := b.runs(t, task.ID); len(runs) != 1 || !runs[0].ScheduledFor.Equal(due) {
					t.Fatalf("runs = %+v, want the crashed tick", runs)
				}
			})
		}
	})

	t.Run("concurrent claimers split the due tasks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		due := time.Now().Add(-time.Second).Truncate(time.Second)
		for range 60 {
			b.dueAt(t, b.task(t, func(t *Task) { t.Schedule = new("@every 1h") }).ID, due)
		}
		var wg sync.WaitGroup
		counts := make([]int, 4)
		for i := range counts {
			c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river, BatchSize: 7})
			wg.Go(func() {
				for {
					n, err := c.ClaimOnce(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if n == 0 {
						return
					}
					counts[i] += n
				}
			})
		}
		wg.Wait()
		if total := counts[0] + counts[1] + counts[2] + counts[3]; total != 60 {
			t.Fatalf("claimed %v = %d in all, want 60", counts, total)
		}
		if n := b.count(t, `SELECT count(*) FROM task_runs WHERE scheduled_for = $1`, due); n != 60 {
			t.Fatalf("%d runs, want 60", n)
		}
		if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'task_run'`); n != 60 {
			t.Fatalf("%d jobs, want 60", n)
		}
	})
}

func TestClaimerLoop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.task(t, func(t *Task) { t.Overlap = OverlapAllow })
	c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := c.Start(context.Background()); err == nil {
		t.Fatal("a second Start succeeded")
	}
	testwait.For(t, 5*time.Second, "two scheduled runs", func() bool { return len(b.runs(t, task.ID)) >= 2 })

	t.Run("paused claims nothing", func(t *testing.T) {
		c.SetPaused(true)
		// A claim in flight when pausing may still commit; count after it.
		testwait.For(t, 3*time.Second, "the loop to settle", func() bool {
			before := len(b.runs(t, task.ID))
			time.Sleep(1200 * time.Millisecond)
			return len(b.runs(t, task.ID)) == before
		})
		if !c.Paused() {
			t.Fatal("Paused() = false")
		}
		got := b.get(t, task.ID)
		if !got.NextRunAt.Before(time.Now()) {
			t.Fatalf("next_run_at %v: the task should be due and left alone", got.NextRunAt)
		}
		c.SetPaused(false)
		n := len(b.runs(t, task.ID))
		testwait.For(t, 3*time.Second, "claims to resume", func() bool { return len(b.runs(t, task.ID)) > n })
	})

	c.Stop()
	c.Stop() // idempotent
}

func TestAdvance(t *testing.T) {
	t.Parallel()
	every, _ := ParseSchedule("@every 10s", "")
	hourly, _ := ParseSchedule("0 * * * *", "")
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		s           *Schedule
		due, now    time.Time
		wantNext    time.Time
		wantSkipped int
	}{
		{"on time", every, base, base.Add(50 * time.Millisecond), base.Add(10 * time.Second), 0},
		{"late within catch-up", every, base, base.Add(25 * time.Second), base.Add(10 * time.Second), 0},
		{"missed for a minute", every, base, base.Add(65 * time.Second), base.Add(70 * time.Second), 6},
		{"missed hours", hourly, base, base.Add(3*time.Hour + time.Minute), base.Add(4 * time.Hour), 3},
	} {
		tick, next, skipped := advance(tc.s, tc.due, tc.now, 30*time.Second)
		if !tick.Equal(tc.due) || next == nil || !next.Equal(tc.wantNext) || skipped != tc.wantSkipped {
			t.Errorf("%s: advance = %v, %v, %d; want %v, %v, %d", tc.name, tick, next, skipped, tc.due, tc.wantNext, tc.wantSkipped)
		}
	}
}

func TestClaimerStartStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startstoptest.Stress(t, func(*testing.T) startstop.Service {
		return NewClaimer(ClaimerOptions{DB: b.pool, River: b.river, Pacing: Pacing{StartJitter: time.Millisecond}})
	})
}

// TestClaimerDrainsInParallel: a backlog larger than a batch is claimed by
// Parallel transactions at once, every tick exactly once.
func TestClaimerDrainsInParallel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	due := time.Now().Add(-time.Second).Truncate(time.Second)
	for range 60 {
		b.dueAt(t, b.task(t, func(t *Task) { t.Overlap = OverlapAllow; t.Schedule = new("@every 1h") }).ID, due)
	}
	c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river, BatchSize: 5, Parallel: 3})
	var mu sync.Mutex
	calls, inside, most := 0, 0, 0
	together := make(chan struct{})
	var once sync.Once
	c.beforeCommit = func(context.Context, pgx.Tx) error {
		mu.Lock()
		if calls++; calls == 1 {
			mu.Unlock()
			return nil // the round's first claim runs alone
		}
		inside++
		most = max(most, inside)
		if inside == 2 { // may happen again after one commits: close once
			once.Do(func() { close(together) })
		}
		mu.Unlock()
		// Hold each commit until two claims were in flight at once (or
		// long enough to say they never are).
		select {
		case <-together:
		case <-time.After(5 * time.Second):
		}
		mu.Lock()
		inside--
		mu.Unlock()
		return nil
	}
	c.round(ctx, true)
	if most < 2 {
		t.Fatalf("at most %d claim transactions at once, want parallel claims", most)
	}
	if n := b.count(t, `SELECT count(*) FROM task_runs WHERE scheduled_for = $1`, due); n != 60 {
		t.Fatalf("%d runs, want 60", n)
	}
	if n := b.count(t, `SELECT count(DISTINCT args->>'run_id') FROM river_job WHERE kind = 'task_run'`); n != 60 {
		t.Fatalf("%d jobs, want 60", n)
	}
}
