package jobs

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/db"
)

// ErrRunFinished is returned by CancelRun for a run that succeeded or
// failed. It wraps db.ErrConflict.
var ErrRunFinished = fmt.Errorf("%w: the run has already finished", db.ErrConflict)

// CancelResult is a cancelled run.
type CancelResult struct {
	Run Run
	// Changed: this call cancelled it (false: it already was).
	Changed bool
}

// CancelRun cancels a queued or running run of the owner's task: the run
// row becomes cancelled and its River job is cancelled in the same
// transaction. A job still queued (available, scheduled, retryable) is
// finalised at once and never starts; a running job gets the cancellation
// through River's control notification on whichever node runs it, which
// cancels the worker's context and so aborts the webhook call. Cancelling a
// cancelled run changes nothing; a finished one is ErrRunFinished.
func CancelRun(ctx context.Context, q db.DB, client *river.Client[pgx.Tx], ownerID, runID string) (CancelResult, error) {
	if uuid.Validate(runID) != nil {
		return CancelResult{}, db.ErrNotFound
	}
	tx, err := q.Begin(ctx)
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel run: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var status string
	// why: the row lock orders this with the worker's StartRun and
	// FinishAttempt, which update the same row.
	err = tx.QueryRow(ctx, `
		SELECT r.status FROM task_runs r JOIN tasks t ON t.id = r.task_id
		WHERE r.id = $1 AND t.owner_id = $2 FOR UPDATE OF r`, runID, ownerID).Scan(&status)
	if err != nil {
		return CancelResult{}, db.Translate(err)
	}
	switch status {
	case StatusCancelled:
		run, err := GetRun(ctx, tx, ownerID, runID)
		return CancelResult{Run: run}, err
	case StatusSucceeded, StatusFailed:
		return CancelResult{}, ErrRunFinished
	}
	if err := cancelJobs(ctx, tx, client, runID); err != nil {
		return CancelResult{}, err
	}
	run, err := markCancelled(ctx, tx, runID)
	if err != nil {
		return CancelResult{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return CancelResult{}, fmt.Errorf("cancel run: %w", err)
	}
	return CancelResult{Run: run, Changed: true}, nil
}

func markCancelled(ctx context.Context, tx pgx.Tx, runID string) (Run, error) {
	var run Run
	err := tx.QueryRow(ctx, `
		WITH closed AS (
			-- why: a running attempt has no record yet (it is written at its
			-- end); one opened by an earlier version is closed.
			INSERT INTO task_run_attempts AS a (run_id, attempt, status, started_at, finished_at, duration_ms, error)
			SELECT r.id, r.attempt, 'cancelled', coalesce(r.started_at, now()), now(),
				(EXTRACT(EPOCH FROM now() - coalesce(r.started_at, now())) * 1000)::int, 'cancelled on request'
			FROM task_runs r WHERE r.id = $1 AND r.status = 'running' AND r.attempt > 0
			ON CONFLICT (run_id, attempt) DO UPDATE SET status = 'cancelled', finished_at = now(),
				duration_ms = (EXTRACT(EPOCH FROM now() - a.started_at) * 1000)::int, error = 'cancelled on request'
				WHERE a.finished_at IS NULL
		)
		UPDATE task_runs r SET status = 'cancelled', finished_at = now(), next_attempt_at = NULL,
			error = 'cancelled on request'
		WHERE r.id = $1
		RETURNING `+runColumns, runID).Scan(runDest(&run)...)
	if err != nil {
		return Run{}, fmt.Errorf("cancel run: %w", err)
	}
	return run, nil
}

// cancelActiveRuns cancels every queued or running run of the tasks, with
// their jobs, inside the caller's transaction (overlap cancel_other).
func cancelActiveRuns(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], taskIDs []string) ([]Run, error) {
	rows, err := tx.Query(ctx, `
		SELECT id::text FROM task_runs WHERE task_id = ANY($1::uuid[]) AND finished_at IS NULL AND status IN ('queued', 'running')
		ORDER BY id FOR UPDATE`, taskIDs)
	if err != nil {
		return nil, fmt.Errorf("cancel active runs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("cancel active runs: %w", err)
	}
	out := make([]Run, 0, len(ids))
	for _, id := range ids {
		if err := cancelJobs(ctx, tx, client, id); err != nil {
			return nil, err
		}
		run, err := markCancelled(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, run)
	}
	return out, nil
}
