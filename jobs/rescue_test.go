package jobs

import (
	"context"
	"errors"
	"testing"

	"github.com/switchboard/switchboard/infra/db"
)

func TestRunsRescued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h"); t.Overlap = OverlapAllow })
	retried, _ := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
	spent, _ := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
	done, _ := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
	for _, id := range []string{retried.ID, spent.ID} {
		if _, err := StartRun(ctx, b.pool, id, 2); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.pool.Exec(ctx, `UPDATE task_runs SET status = 'succeeded' WHERE id = $1`, done.ID); err != nil {
		t.Fatal(err)
	}
	changed, err := RunsRescued(ctx, b.pool, []RescuedRun{
		{RunID: retried.ID, DeadNode: "node-a"}, {RunID: spent.ID, DeadNode: "node-a", Discarded: true}, {RunID: done.ID, DeadNode: "node-a"},
	})
	if err != nil || len(changed) != 2 {
		t.Fatalf("rescued %d: %v", len(changed), err)
	}
	for _, c := range changed {
		if c.ProjectID != b.project || (c.Run.ID == retried.ID) != (c.Run.Status == StatusQueued) {
			t.Fatalf("changed run %+v of project %s", c.Run, c.ProjectID)
		}
	}
	for _, tc := range []struct {
		id, status, errText string
		finished            bool
	}{
		{retried.ID, StatusQueued, "node node-a stopped while running attempt 2; retrying on a live node", false},
		{spent.ID, StatusFailed, "node node-a stopped while running attempt 2; no attempts left", true},
		{done.ID, StatusSucceeded, "", false},
	} {
		r, err := GetRun(ctx, b.pool, b.project, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		var errText string
		if r.Error != nil {
			errText = *r.Error
		}
		if r.Status != tc.status || errText != tc.errText || (r.FinishedAt != nil) != tc.finished {
			t.Fatalf("run %s: status %s, error %q, finished %v", tc.id, r.Status, errText, r.FinishedAt)
		}
	}
	for _, id := range []string{retried.ID, spent.ID} {
		if n := b.count(t, `SELECT count(*) FROM task_run_attempts WHERE run_id = $1 AND attempt = 2 AND status = 'interrupted' AND finished_at IS NOT NULL`, id); n != 1 {
			t.Fatalf("run %s: the attempt on the dead node was not closed as interrupted", id)
		}
	}
}

// TestLateWorkerCannotOverwriteALaterAttempt: a worker its node was taken
// for dead finishes attempt 1 after the rescued run started attempt 2
// elsewhere: the run keeps attempt 2's state.
func TestLateWorkerCannotOverwriteALaterAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h"); t.Overlap = OverlapAllow })
	run, _ := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
	if _, err := StartRun(ctx, b.pool, run.ID, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := RunsRescued(ctx, b.pool, []RescuedRun{{RunID: run.ID, DeadNode: "node-a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := StartRun(ctx, b.pool, run.ID, 2); err != nil {
		t.Fatal(err)
	}
	_, err := FinishAttempt(ctx, b.pool, run.ID, Outcome{Attempt: 1, Status: StatusSucceeded, HTTPStatus: 200})
	if !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("late attempt 1 recorded: %v", err)
	}
	if r, err := GetRun(ctx, b.pool, b.project, run.ID); err != nil || r.Status != StatusRunning || r.Attempt != 2 {
		t.Fatalf("run after the late worker: %+v %v", r, err)
	}
	if _, err := FinishAttempt(ctx, b.pool, run.ID, Outcome{Attempt: 2, Status: StatusSucceeded, HTTPStatus: 200}); err != nil {
		t.Fatalf("attempt 2: %v", err)
	}
}
