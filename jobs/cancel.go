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

// CancelRun cancels a queued or running run of the project's task: the run
// row becomes cancelled and its River job is cancelled in the same
// transaction. A job still queued (available, scheduled, retryable) is
// finalised at once and never starts; a running job gets the cancellation
// through River's control notification on whichever node runs it, which
// cancels the worker's context and so aborts the webhook call. Cancelling a
// cancelled run changes nothing; a finished one is ErrRunFinished.
func CancelRun(ctx context.Context, q db.DB, client *river.Client[pgx.Tx], projectID, runID string) (CancelResult, error) {
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
		WHERE r.id = $1 AND t.project_id = $2 FOR UPDATE OF r`, runID, projectID).Scan(&status)
	if err != nil {
		return CancelResult{}, db.Translate(err)
	}
	switch status {
	case StatusCancelled:
		run, err := GetRun(ctx, tx, projectID, runID)
		return CancelResult{Run: run}, err
	case StatusSucceeded, StatusFailed:
		return CancelResult{}, ErrRunFinished
	}
	if err := cancelJobs(ctx, tx, client, runID); err != nil {
		return CancelResult{}, err
	}
	runs, err := cancelRuns(ctx, tx, []string{runID})
	if err != nil {
		return CancelResult{}, err
	}
	if len(runs) != 1 {
		return CancelResult{}, fmt.Errorf("cancel run: %w", pgx.ErrNoRows)
	}
	if err := tx.Commit(ctx); err != nil {
		return CancelResult{}, fmt.Errorf("cancel run: %w", err)
	}
	return CancelResult{Run: runs[0], Changed: true}, nil
}
