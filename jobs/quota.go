package jobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/quota"
)

// The counts behind the quotas jobs enforces; $1 is the project.
const (
	countTasksSQL = `SELECT count(*) FROM tasks WHERE project_id = $1`
	// why: finished_at IS NULL is "not final" and is what
	// task_runs_unfinished_idx holds, probed once per task of the project.
	countQueuedRunsSQL = `SELECT count(*) FROM tasks t JOIN task_runs r ON r.task_id = t.id
		WHERE t.project_id = $1 AND r.finished_at IS NULL`
	countBackfillSQL = countQueuedRunsSQL + ` AND r.backfill`
)

// takeQueuedRuns refuses, with a quota.ExceededError, n more runs not yet
// final in the project, and holds the project's queued_runs lock until tx
// ends so that concurrent triggers on any replica count one after another.
func takeQueuedRuns(ctx context.Context, tx pgx.Tx, lim quota.Limits, projectID string, n int) error {
	return quota.Take(ctx, tx, quota.QueuedRuns, lim.OrDefaults().QueuedRuns, projectID, countQueuedRunsSQL, n)
}

// projectOf is projectID, or for "" the owner's personal project.
func projectOf(ctx context.Context, tx pgx.Tx, projectID, ownerID string) (string, error) {
	if projectID != "" {
		return projectID, nil
	}
	err := tx.QueryRow(ctx, `SELECT id::text FROM projects WHERE personal_of = $1`, ownerID).Scan(&projectID)
	if err != nil {
		return "", fmt.Errorf("personal project: %w", err)
	}
	return projectID, nil
}
