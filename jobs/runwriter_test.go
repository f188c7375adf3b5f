package jobs

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/infra/db"
)

// TestRunWriter: batched starts and outcomes mean what StartRun and
// FinishAttempt mean, run for run, whoever shares the batch.
func TestRunWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("concurrent runs start and finish in shared statements, each attempt recorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h"); t.Overlap = OverlapAllow })
		const runs = 60
		ids := make([]string, runs)
		for i := range ids {
			r, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = r.ID
		}
		w := NewRunWriter(RunWriterOptions{DB: b.pool, MaxBatch: 16})
		var wg sync.WaitGroup
		errs := make([]error, runs)
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rc, err := w.StartRun(ctx, id, 1)
				if err == nil && (rc.Run.ID != id || rc.Run.Status != StatusRunning || rc.Task.ID != task.ID || rc.SigningSecret == "") {
					err = errors.New("started the wrong run or without its task")
				}
				if err == nil {
					var run Run
					run, err = w.FinishAttempt(ctx, id, Outcome{Attempt: 1, Status: StatusSucceeded, HTTPStatus: 200 + i%3, Excerpt: "ok"})
					if err == nil && (run.ID != id || run.Status != StatusSucceeded || *run.HTTPStatus != 200+i%3) {
						err = errors.New("finished the wrong run")
					}
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
		}
		if n := b.count(t, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND status = 'succeeded' AND finished_at IS NOT NULL`, task.ID); n != runs {
			t.Fatalf("%d runs succeeded, want %d", n, runs)
		}
		if n := b.count(t, `SELECT count(*) FROM task_run_attempts a JOIN task_runs r ON r.id = a.run_id
			WHERE r.task_id = $1 AND a.attempt = 1 AND a.status = 'succeeded' AND a.http_status = r.http_status`, task.ID); n != runs {
			t.Fatalf("%d attempts recorded, want %d", n, runs)
		}
	})

	t.Run("a run of a task with a concurrency limit takes its slot alone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h"); t.Overlap = OverlapAllow; t.MaxConcurrency = new(1) })
		first, _ := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		second, _ := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		w := NewRunWriter(RunWriterOptions{DB: b.pool})
		if _, err := w.StartRun(ctx, first.ID, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := w.StartRun(ctx, second.ID, 1); !errors.Is(err, ErrNoSlot) {
			t.Fatalf("second run of a max_concurrency 1 task started: %v", err)
		}
	})

	t.Run("a late worker's outcome and a cancelled run's are not recorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h"); t.Overlap = OverlapAllow })
		rescued, _ := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		cancelled, _ := TriggerRun(ctx, b.pool, b.river, b.project, task.ID)
		w := NewRunWriter(RunWriterOptions{DB: b.pool})
		for _, id := range []string{rescued.ID, cancelled.ID} {
			if _, err := w.StartRun(ctx, id, 1); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := RunsRescued(ctx, b.pool, []RescuedRun{{RunID: rescued.ID, DeadNode: "node-a"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.StartRun(ctx, rescued.ID, 2); err != nil {
			t.Fatal(err)
		}
		if _, err := CancelRun(ctx, b.pool, b.river, b.project, cancelled.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := w.FinishAttempt(ctx, rescued.ID, Outcome{Attempt: 1, Status: StatusSucceeded}); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("late attempt 1 recorded: %v", err)
		}
		if _, err := w.FinishAttempt(ctx, cancelled.ID, Outcome{Attempt: 1, Status: StatusSucceeded}); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("outcome of a cancelled run recorded: %v", err)
		}
		if _, err := w.StartRun(ctx, cancelled.ID, 2); !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("cancelled run started again: %v", err)
		}
		if r, _ := GetRun(ctx, b.pool, b.project, rescued.ID); r.Status != StatusRunning || r.Attempt != 2 {
			t.Fatalf("rescued run after the late worker: %+v", r)
		}
		if r, _ := GetRun(ctx, b.pool, b.project, cancelled.ID); r.Status != StatusCancelled {
			t.Fatalf("cancelled run: %+v", r)
		}
	})
}
