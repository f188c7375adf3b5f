package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/quota"
)

// Run triggers.
const (
	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
)

// Run is one execution of a task, as the API shows it.
type Run struct {
	ID              string          `json:"id" format:"uuid"`
	TaskID          string          `json:"task_id" format:"uuid"`
	Status          string          `json:"status" enum:"queued,running,succeeded,failed,cancelled"`
	Trigger         string          `json:"trigger" enum:"schedule,manual"`
	ScheduledFor    time.Time       `json:"scheduled_for"`
	StartedAt       *time.Time      `json:"started_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	Attempt         int             `json:"attempt"`
	DurationMS      *int64          `json:"duration_ms"`
	HTTPStatus      *int            `json:"http_status"`
	Error           *string         `json:"error"`
	ResponseExcerpt *string         `json:"response_excerpt"`
	SkippedTicks    int             `json:"skipped_ticks" doc:"earlier ticks folded into this run because no worker ran at the time"`
	Payload         json.RawMessage `json:"payload" doc:"the run's input (webhook body or publish payload); null: the task's own"`
	RetryOf         *string         `json:"retry_of" format:"uuid" doc:"the failed or cancelled run this one retries"`
	NextAttemptAt   *time.Time      `json:"next_attempt_at" doc:"while queued between attempts: when the next attempt is due"`
	Priority        int             `json:"priority" minimum:"1" maximum:"4" doc:"1 (first) to 4 (last): its trigger's, or its task's when made"`
	Output          json.RawMessage `json:"output" doc:"the JSON body the webhook answered its succeeded attempt with; over the size limit, a string of its first bytes (output_truncated); null: none, or not JSON"`
	OutputTruncated bool            `json:"output_truncated" doc:"the webhook's answer was larger than the limit: output is a string of its first bytes"`
	CreatedAt       time.Time       `json:"created_at"`
}

const runColumns = `r.id::text, r.task_id::text, r.status, r.trigger, r.scheduled_for, r.started_at, r.finished_at,
	r.attempt, r.duration_ms, r.http_status, r.error, r.response_excerpt, r.skipped_ticks,
	r.payload, r.retry_of::text, r.next_attempt_at, r.created_at, r.priority, r.output, r.output_truncated`

func runDest(r *Run) []any {
	return []any{&r.ID, &r.TaskID, &r.Status, &r.Trigger, &r.ScheduledFor, &r.StartedAt, &r.FinishedAt,
		&r.Attempt, &r.DurationMS, &r.HTTPStatus, &r.Error, &r.ResponseExcerpt, &r.SkippedTicks,
		&r.Payload, &r.RetryOf, &r.NextAttemptAt, &r.CreatedAt, &r.Priority, &r.Output, &r.OutputTruncated}
}

// ErrRunActive is returned by TriggerRun when the task's overlap policy is
// skip and one of its runs is queued or running. It wraps db.ErrConflict.
var ErrRunActive = fmt.Errorf("%w: a run of this task is already queued or running (overlap is skip)", db.ErrConflict)

// TriggerRun creates a manual run of the project's task, without input,
// under the default quotas; see Trigger.
func TriggerRun(ctx context.Context, q db.DB, client *river.Client[pgx.Tx], projectID, taskID string) (Run, error) {
	res, err := Trigger(ctx, q, client, quota.Limits{}, TriggerRequest{ProjectID: projectID, TaskID: taskID})
	return res.Run, err
}

// GetRun returns a run of one of the project's tasks.
func GetRun(ctx context.Context, q db.DB, projectID, id string) (Run, error) {
	if uuid.Validate(id) != nil {
		return Run{}, db.ErrNotFound
	}
	var r Run
	err := q.QueryRow(ctx, `
		SELECT `+runColumns+` FROM task_runs r JOIN tasks t ON t.id = r.task_id
		WHERE r.id = $1 AND t.project_id = $2`, id, projectID).Scan(runDest(&r)...)
	return r, db.Translate(err)
}

// ListRuns returns a page of the runs of the project's task, newest first.
func ListRuns(ctx context.Context, q db.DB, projectID, taskID string, p Page) ([]Run, string, error) {
	return ListRunsWhere(ctx, q, projectID, RunFilter{TaskID: taskID}, p)
}

// RunFilter narrows a run listing; zero fields do not filter.
type RunFilter struct {
	TaskID string // one task's runs (it must be the project's); "": all the project's
	Status string // one status, e.g. StatusFailed for the dead-letter view
}

// listRunsSQL is the page query of ListRunsWhere: $1 project, ($2, $3) the
// cursor, $4 the limit, $5 and $6 the filter (see RunFilter.where).
func listRunsSQL(f RunFilter) string {
	return `
		SELECT ` + runColumns + ` FROM task_runs r JOIN tasks t ON t.id = r.task_id
		WHERE t.project_id = $1 AND (r.created_at, r.id) < ($2, $3::uuid)` + f.where() + `
		ORDER BY r.created_at DESC, r.id DESC
		LIMIT $4`
}

// where is the filter's SQL on $5 (task id) and $6 (status), one fixed
// text per combination: a nullable "$5 IS NULL OR r.task_id = $5" would
// keep a generic plan off the task's index. The failed filter says what
// the dead-letter index holds (a failed run is finished, with its error).
func (f RunFilter) where() string {
	var w string
	if f.TaskID != "" {
		w += ` AND r.task_id = $5::uuid`
	} else {
		w += ` AND $5 = ''`
	}
	switch f.Status {
	case "":
		w += ` AND $6 = ''`
	case StatusFailed:
		w += ` AND r.status = $6 AND r.finished_at IS NOT NULL AND r.error IS NOT NULL`
	default:
		w += ` AND r.status = $6`
	}
	return w
}

// ListRunsWhere returns a page of the project's runs that match f, newest
// first.
func ListRunsWhere(ctx context.Context, q db.DB, projectID string, f RunFilter, p Page) ([]Run, string, error) {
	c, err := p.decode()
	if err != nil {
		return nil, "", err
	}
	if f.TaskID != "" {
		if _, err := GetTask(ctx, q, projectID, f.TaskID); err != nil {
			return nil, "", err
		}
	}
	rows, err := q.Query(ctx, listRunsSQL(f), projectID, c.createdAt, c.id, p.limit()+1, f.TaskID, f.Status)
	if err != nil {
		return nil, "", fmt.Errorf("list runs: %w", err)
	}
	items, next, err := collectPage(p, rows, func(row pgx.CollectableRow) (Run, error) {
		var r Run
		return r, row.Scan(runDest(&r)...)
	}, func(r Run) (time.Time, string) { return r.CreatedAt, r.ID })
	if err != nil {
		return nil, "", fmt.Errorf("list runs: %w", err)
	}
	return items, next, nil
}

// RunContext is what the run worker needs: the run and its task.
type RunContext struct {
	Run  Run
	Task Task
	// SigningSecret of the task (never part of Task's JSON after create).
	SigningSecret string
	// PreviousSigningSecret is the secret a rotation replaced while its
	// overlap lasts (it signs beside SigningSecret); "" otherwise.
	PreviousSigningSecret string
}

// ErrNoSlot is returned by StartRun when the run must wait: its task runs
// one at a time (buffer_one, cancel_other) or max_concurrency at a time,
// and that many runs are running, or earlier runs wait ahead of it.
var ErrNoSlot = errors.New("no run slot free: the run waits")

// takeSlot admits a run of a task with a concurrency limit, or returns
// ErrNoSlot. Starts of one task are serialised by a transaction-scoped
// advisory lock on its id (not the task row, which the claim loop locks),
// so the count and the running mark that follows cannot interleave with
// another start on any replica. Waiting runs go in creation order: a run is
// admitted only if a slot is free and no due run queued before it waits.
func takeSlot(ctx context.Context, tx pgx.Tx, runID string) error {
	var taskID string
	var limit *int
	err := tx.QueryRow(ctx, `
		SELECT t.id::text, CASE WHEN t.overlap IN ('buffer_one', 'cancel_other') THEN 1 ELSE t.max_concurrency END
		FROM task_runs r JOIN tasks t ON t.id = r.task_id
		WHERE r.id = $1 AND r.status IN ('queued', 'running')`, runID).Scan(&taskID, &limit)
	if err != nil || limit == nil {
		return db.Translate(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('task_run_slot:' || $1, 0))`, taskID); err != nil {
		return fmt.Errorf("start run: slot lock: %w", err)
	}
	var free bool
	err = tx.QueryRow(ctx, `
		WITH me AS (SELECT created_at, id FROM task_runs WHERE id = $2)
		SELECT (SELECT count(*) FROM task_runs a WHERE a.task_id = $1 AND a.finished_at IS NULL AND a.status = 'running' AND a.id <> $2) < $3
			AND NOT EXISTS (SELECT 1 FROM task_runs a, me
				WHERE a.task_id = $1 AND a.finished_at IS NULL AND a.status = 'queued' AND a.id <> $2 AND (a.created_at, a.id) < (me.created_at, me.id)
				AND a.scheduled_for <= now() AND (a.next_attempt_at IS NULL OR a.next_attempt_at <= now()))`, taskID, runID, *limit).Scan(&free)
	if err != nil {
		return fmt.Errorf("start run: count slots: %w", err)
	}
	if !free {
		return ErrNoSlot
	}
	return nil
}

// Outcome is the result of one attempt.
type Outcome struct {
	Status     string // succeeded, failed, or queued (a retry follows)
	Attempt    int    // the attempt's number (Run.Attempt after StartRun)
	HTTPStatus int    // 0: none
	Error      string // "": none
	Excerpt    string // "": none
	Duration   time.Duration
	// NextAttemptAt is when the retry is due (Status queued).
	NextAttemptAt *time.Time
	// Interrupted: the worker stopped; the attempt did not fail by itself.
	Interrupted bool
	// StartedAt is when the attempt started (Run.StartedAt after
	// StartRun); zero: Duration before now.
	StartedAt time.Time
	// Output is the run's output (a JSON document; nil: none), kept with a
	// succeeded outcome; OutputTruncated flags one cut to the limit.
	Output          json.RawMessage
	OutputTruncated bool
}

// attemptStatus is the status of the attempt itself.
func (o Outcome) attemptStatus() string {
	switch {
	case o.Status == StatusQueued && o.Interrupted:
		return AttemptInterrupted
	case o.Status == StatusQueued:
		return StatusFailed
	}
	return o.Status
}

func nilIfZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func taskDest(t *Task) []any {
	return []any{&t.ID, &t.OwnerID, &t.ProjectID, &t.Name, &t.Schedule, &t.Timezone, &t.Action, &t.Active, &t.Overlap,
		&t.MaxConcurrency, &t.MaxAttempts, &t.TimeoutSeconds, &t.Priority, &t.NextRunAt, &t.LastRunAt, &t.RunCount, &t.SkippedTicks, &t.CreatedAt, &t.UpdatedAt,
		&t.PreviousSecretExpiresAt}
}
