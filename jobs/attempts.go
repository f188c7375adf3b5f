package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// AttemptInterrupted is the status of an attempt cut short by its worker
// stopping or its node dying; the run is retried.
const AttemptInterrupted = "interrupted"

// Attempt is one try of a run, as the API shows it.
type Attempt struct {
	Attempt         int        `json:"attempt"`
	Status          string     `json:"status" enum:"running,succeeded,failed,cancelled,interrupted"`
	StartedAt       time.Time  `json:"started_at"`
	FinishedAt      *time.Time `json:"finished_at"`
	DurationMS      *int64     `json:"duration_ms"`
	HTTPStatus      *int       `json:"http_status"`
	Error           *string    `json:"error"`
	ResponseExcerpt *string    `json:"response_excerpt"`
}

// ListAttempts returns every attempt of a run of the project's task, first
// first. An attempt is written to task_run_attempts once, when it ends;
// the attempt in progress is the run's own (running, attempt, started_at)
// and is listed as running.
func ListAttempts(ctx context.Context, q db.DB, projectID, runID string) ([]Attempt, error) {
	if _, err := GetRun(ctx, q, projectID, runID); err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, `
		SELECT attempt, status, started_at, finished_at, duration_ms, http_status, error, response_excerpt
		FROM task_run_attempts WHERE run_id = $1
		UNION ALL
		SELECT r.attempt, 'running', coalesce(r.started_at, r.created_at), NULL, NULL, NULL, NULL, NULL
		FROM task_runs r
		WHERE r.id = $1 AND r.status = 'running' AND r.attempt > 0
			AND NOT EXISTS (SELECT 1 FROM task_run_attempts a WHERE a.run_id = r.id AND a.attempt = r.attempt)
		ORDER BY 1`, runID)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		return a, r.Scan(&a.Attempt, &a.Status, &a.StartedAt, &a.FinishedAt, &a.DurationMS, &a.HTTPStatus, &a.Error, &a.ResponseExcerpt)
	})
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	return nonNil(items), nil
}
