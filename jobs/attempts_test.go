package jobs

import (
	"context"
	"testing"
)

// TestAttemptRecords: an attempt is written to task_run_attempts once, at
// its end (its outcome, a cancel, a rescue, a reconcile, or a later
// attempt starting); while it runs, ListAttempts shows it from the run.
func TestAttemptRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := func(t *testing.T, b *testBundle, runID string, attempt int) RunContext {
		t.Helper()
		rc, err := StartRun(ctx, b.pool, runID, attempt)
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	list := func(t *testing.T, b *testBundle, runID string) []Attempt {
		t.Helper()
		got, err := ListAttempts(ctx, b.pool, b.project, runID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	newRun := func(t *testing.T, b *testBundle) Run {
		t.Helper()
		task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h"); t.Overlap = OverlapAllow })
		run, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}

	t.Run("the running attempt is listed from the run and written once when it ends", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)
		rc := start(t, b, run.ID, 1)
		if n := b.count(t, `SELECT count(*) FROM task_run_attempts WHERE run_id = $1`, run.ID); n != 0 {
			t.Fatalf("the start wrote %d attempt rows", n)
		}
		got := list(t, b, run.ID)
		if len(got) != 1 || got[0].Attempt != 1 || got[0].Status != StatusRunning || !got[0].StartedAt.Equal(*rc.Run.StartedAt) ||
			got[0].FinishedAt != nil || got[0].DurationMS != nil {
			t.Fatalf("while running: %+v", got)
		}
		for _, w := range []*RunWriter{nil, NewRunWriter(RunWriterOptions{DB: b.pool})} {
			o := Outcome{Attempt: 1, Status: StatusSucceeded, HTTPStatus: 200, Excerpt: "ok", StartedAt: *rc.Run.StartedAt}
			var err error
			if w == nil {
				_, err = FinishAttempt(ctx, b.pool, run.ID, o)
			} else {
				// A second outcome of the same attempt keeps the first.
				o.HTTPStatus, o.Excerpt = 201, "again"
				_, err = w.FinishAttempt(ctx, run.ID, o)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		got = list(t, b, run.ID)
		if len(got) != 1 || got[0].Status != StatusSucceeded || !got[0].StartedAt.Equal(*rc.Run.StartedAt) || got[0].FinishedAt == nil ||
			got[0].FinishedAt.Before(got[0].StartedAt) || got[0].HTTPStatus == nil || *got[0].HTTPStatus != 200 {
			t.Fatalf("finished: %+v", got)
		}
	})

	t.Run("a run started again on a later attempt records the earlier one as interrupted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)
		first := start(t, b, run.ID, 1)
		// The worker of attempt 1 died without an outcome (a panic, a
		// stuck job rescued by River); attempt 2 starts, batched.
		if _, err := NewRunWriter(RunWriterOptions{DB: b.pool}).StartRun(ctx, run.ID, 2); err != nil {
			t.Fatal(err)
		}
		got := list(t, b, run.ID)
		if len(got) != 2 || got[0].Status != AttemptInterrupted || got[0].FinishedAt == nil || got[0].Error == nil ||
			!got[0].StartedAt.Equal(*first.Run.StartedAt) || got[1].Attempt != 2 || got[1].Status != StatusRunning {
			t.Fatalf("attempts: %+v", got)
		}
	})

	t.Run("a cancel records the running attempt as cancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)
		start(t, b, run.ID, 1)
		if _, err := CancelRun(ctx, b.pool, b.river, b.project, run.ID); err != nil {
			t.Fatal(err)
		}
		got := list(t, b, run.ID)
		if len(got) != 1 || got[0].Status != StatusCancelled || got[0].FinishedAt == nil || got[0].DurationMS == nil {
			t.Fatalf("attempts: %+v", got)
		}
	})

	t.Run("a reconciled run records its running attempt as interrupted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)
		start(t, b, run.ID, 1)
		if _, err := b.pool.Exec(ctx, `UPDATE task_runs SET created_at = now() - interval '1 minute' WHERE id = $1`, run.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE args->>'run_id' = $1`, run.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := ReconcileOrphanedRuns(ctx, b.pool, 10); err != nil || len(got) != 1 {
			t.Fatalf("reconciled %d: %v", len(got), err)
		}
		got := list(t, b, run.ID)
		if len(got) != 1 || got[0].Status != AttemptInterrupted || got[0].FinishedAt == nil {
			t.Fatalf("attempts: %+v", got)
		}
	})

	t.Run("a queued run that never started has no attempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)
		if got := list(t, b, run.ID); len(got) != 0 {
			t.Fatalf("attempts: %+v", got)
		}
	})
}
