package jobs

import (
	"context"
	"errors"
	"testing"
)

func TestReconcileOrphanedRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	task := b.task(t, func(t *Task) { t.Schedule = nil; t.Overlap = OverlapAllow })
	trigger := func() Run {
		t.Helper()
		r, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := b.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	orphan := func(r Run, jobState string) {
		t.Helper()
		exec(`UPDATE task_runs SET status = 'running', attempt = 1, created_at = now() - interval '1 minute' WHERE id = $1`, r.ID)
		exec(`INSERT INTO task_run_attempts (run_id, attempt, status) VALUES ($1, 1, 'running')`, r.ID)
		switch jobState {
		case "gone":
			exec(`DELETE FROM river_job WHERE args->>'run_id' = $1`, r.ID)
		case "available":
		default:
			exec(`UPDATE river_job SET state = $2, finalized_at = now() WHERE args->>'run_id' = $1`, r.ID, jobState)
		}
	}
	want := map[string]string{}
	for state, status := range map[string]string{"completed": StatusSucceeded, "discarded": StatusFailed, "cancelled": StatusCancelled, "gone": StatusFailed} {
		r := trigger()
		orphan(r, state)
		want[r.ID] = status
	}
	live := trigger()
	orphan(live, "available")
	fresh := trigger() // its job is live too, and it is young

	got, err := ReconcileOrphanedRuns(ctx, b.pool, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("reconciled %d runs, want %d: %+v", len(got), len(want), got)
	}
	for _, rr := range got {
		if rr.Run.Status != want[rr.Run.ID] || rr.ProjectID != b.project || rr.Run.FinishedAt == nil || rr.Run.Error == nil {
			t.Errorf("run %s: %s (%v), want %s", rr.Run.ID, rr.Run.Status, rr.Run.Error, want[rr.Run.ID])
		}
		if n := b.count(t, `SELECT count(*) FROM task_run_attempts WHERE run_id = $1 AND status = 'interrupted' AND finished_at IS NOT NULL`, rr.Run.ID); n != 1 {
			t.Errorf("run %s: its open attempt was not closed", rr.Run.ID)
		}
	}
	for _, r := range []Run{live, fresh} {
		if g, _ := GetRun(ctx, b.pool, b.project, r.ID); g.FinishedAt != nil {
			t.Errorf("a run with a live job was reconciled: %+v", g)
		}
	}
	if again, err := ReconcileOrphanedRuns(ctx, b.pool, 100); err != nil || len(again) != 0 {
		t.Fatalf("second pass: %d, %v", len(again), err)
	}

	t.Run("an orphan stops blocking an overlap-skip task", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = nil })
		r, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(ctx, `UPDATE task_runs SET status = 'running', created_at = now() - interval '1 minute' WHERE id = $1`, r.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(ctx, `UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE args->>'run_id' = $1`, r.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID); !errors.Is(err, ErrRunActive) {
			t.Fatalf("trigger while the orphan blocks: %v", err)
		}
		if _, err := ReconcileOrphanedRuns(ctx, b.pool, 100); err != nil {
			t.Fatal(err)
		}
		if _, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID); err != nil {
			t.Fatalf("trigger after reconciling: %v", err)
		}
	})
}
