package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/quota"
)

const taskColumns = `t.id::text, t.owner_id::text, t.project_id::text, t.name, t.schedule, t.timezone, t.action, t.active, t.overlap,
	t.max_concurrency, t.max_attempts, t.timeout_seconds, t.priority, t.next_run_at, t.last_run_at, t.run_count, t.skipped_ticks, t.created_at, t.updated_at,
	CASE WHEN t.previous_secret_expires_at > now() THEN t.previous_secret_expires_at END`

func scanTask(row pgx.Row, t *Task) error { return row.Scan(taskDest(t)...) }

// nextRun is the first tick after now, or nil for an inactive or on-demand
// task.
func nextRun(t *Task, now time.Time) (*time.Time, error) {
	if !t.Active || t.OnDemand() {
		return nil, nil
	}
	s, err := ParseSchedule(*t.Schedule, t.Timezone)
	if err != nil {
		return nil, invalid("schedule", "%v", err)
	}
	n := s.Next(now)
	return &n, nil
}

// CreateTask stores a normalized task in its project (ProjectID; "" for
// its owner's personal project), made by its owner, with a new signing
// secret, due at its first tick. The returned task carries the secret. A
// project has at most lim.Tasks tasks (a quota.ExceededError), counted
// under the project's tasks lock, so concurrent creates on any replicas
// cannot pass it together.
func CreateTask(ctx context.Context, q db.DB, lim quota.Limits, t Task) (Task, error) {
	next, err := nextRun(&t, time.Now())
	if err != nil {
		return Task{}, err
	}
	secret := NewSigningSecret()
	var out Task
	err = pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		project, err := projectOf(ctx, tx, t.ProjectID, t.OwnerID)
		if err != nil {
			return err
		}
		if err := quota.Take(ctx, tx, quota.Tasks, lim.OrDefaults().Tasks, project, countTasksSQL, 1); err != nil {
			return err
		}
		return scanTask(tx.QueryRow(ctx, `
			INSERT INTO tasks AS t (owner_id, name, schedule, timezone, action, active, overlap, max_attempts, timeout_seconds, signing_secret, next_run_at, max_concurrency, project_id, priority)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
			RETURNING `+taskColumns,
			t.OwnerID, t.Name, t.Schedule, t.Timezone, t.Action, t.Active, t.Overlap, t.MaxAttempts, t.TimeoutSeconds, secret, next, t.MaxConcurrency, project,
			cmp.Or(t.Priority, DefaultPriority)), &out)
	})
	if err != nil {
		return Task{}, fmt.Errorf("create task: %w", db.Translate(err))
	}
	out.SigningSecret = secret
	return out, nil
}

// GetTask returns the project's task; another project's id is db.ErrNotFound.
func GetTask(ctx context.Context, q db.DB, projectID, id string) (Task, error) {
	if uuid.Validate(id) != nil {
		return Task{}, db.ErrNotFound
	}
	var t Task
	err := scanTask(q.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks t WHERE t.id = $1 AND t.project_id = $2`, id, projectID), &t)
	return t, db.Translate(err)
}

// ListTasks returns a page of the project's tasks, newest first, and the
// cursor of the next page ("" after the last). kind is KindScheduled,
// KindOnDemand or "" (both).
func ListTasks(ctx context.Context, q db.DB, projectID string, p Page, kind string) ([]Task, string, error) {
	c, err := p.decode()
	if err != nil {
		return nil, "", err
	}
	rows, err := q.Query(ctx, `
		SELECT `+taskColumns+` FROM tasks t
		WHERE t.project_id = $1 AND (t.created_at, t.id) < ($2, $3::uuid)
			AND ($5 = '' OR (t.schedule IS NULL) = ($5 = 'on_demand'))
		ORDER BY t.created_at DESC, t.id DESC
		LIMIT $4`, projectID, c.createdAt, c.id, p.limit()+1, kind)
	if err != nil {
		return nil, "", fmt.Errorf("list tasks: %w", err)
	}
	items, next, err := collectPage(p, rows, func(r pgx.CollectableRow) (Task, error) {
		var t Task
		return t, scanTask(r, &t)
	}, func(t Task) (time.Time, string) { return t.CreatedAt, t.ID })
	if err != nil {
		return nil, "", fmt.Errorf("list tasks: %w", err)
	}
	return items, next, nil
}

// TaskPatch is a partial update; nil fields stay as they are. Schedule is
// doubly optional: nil keeps it, a nil *string makes the task on-demand.
type TaskPatch struct {
	Name           *string
	Schedule       **string
	Timezone       *string
	Action         *Action
	Active         *bool
	Overlap        *string
	MaxConcurrency **int // nil keeps it; a nil *int removes the limit
	MaxAttempts    *int
	TimeoutSeconds *int
	Priority       *int
}

func (p TaskPatch) apply(t *Task) (reschedule bool) {
	set(&t.Name, p.Name)
	if p.Action != nil {
		t.Action = *p.Action
	}
	set(&t.Overlap, p.Overlap)
	if p.MaxConcurrency != nil {
		t.MaxConcurrency = *p.MaxConcurrency
	}
	set(&t.MaxAttempts, p.MaxAttempts)
	set(&t.TimeoutSeconds, p.TimeoutSeconds)
	set(&t.Priority, p.Priority)
	if p.Schedule != nil {
		old := t.Schedule
		t.Schedule = *p.Schedule
		reschedule = (old == nil) != (t.Schedule == nil) || (old != nil && *old != *t.Schedule)
	}
	reschedule = set(&t.Timezone, p.Timezone) || reschedule
	return set(&t.Active, p.Active) || reschedule
}

// set copies *v into *dst when v is given and reports whether it changed.
func set[T comparable](dst *T, v *T) bool {
	if v == nil || *dst == *v {
		if v != nil {
			*dst = *v
		}
		return false
	}
	*dst = *v
	return true
}

// UpdateTask applies a patch to the project's task. A changed schedule,
// timezone or active flag recomputes next_run_at from now; other edits keep
// a pending tick. The row is locked while it is read, checked and written.
// A patch that changes nothing writes nothing: updated_at stays.
func UpdateTask(ctx context.Context, q db.DB, projectID, id string, p TaskPatch, allowPrivate bool) (Task, error) {
	if uuid.Validate(id) != nil {
		return Task{}, db.ErrNotFound
	}
	tx, err := q.Begin(ctx)
	if err != nil {
		return Task{}, fmt.Errorf("update task: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var t Task
	err = scanTask(tx.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks t WHERE t.id = $1 AND t.project_id = $2 FOR UPDATE`, id, projectID), &t)
	if err != nil {
		return Task{}, db.Translate(err)
	}
	before := t
	reschedule := p.apply(&t)
	if reflect.DeepEqual(before, t) {
		return before, nil // an empty patch, or the values it already has: updated_at stays
	}
	if err := t.Normalize(allowPrivate); err != nil {
		return Task{}, err
	}
	next := t.NextRunAt
	// A tick claimed ahead and not yet due is decided anew with the change.
	withdrawn, err := withdrawAhead(ctx, tx, id)
	if err != nil {
		return Task{}, fmt.Errorf("update task: %w", err)
	}
	if !withdrawn.IsZero() {
		next = &withdrawn
	}
	if reschedule {
		if next, err = nextRun(&t, time.Now()); err != nil {
			return Task{}, err
		}
	}
	var out Task
	err = scanTask(tx.QueryRow(ctx, `
		UPDATE tasks t SET name = $3, schedule = $4, timezone = $5, action = $6, active = $7, overlap = $8,
			max_attempts = $9, timeout_seconds = $10, next_run_at = $11, max_concurrency = $12, priority = $13, updated_at = now()
		WHERE t.id = $1 AND t.project_id = $2
		RETURNING `+taskColumns,
		id, projectID, t.Name, t.Schedule, t.Timezone, t.Action, t.Active, t.Overlap, t.MaxAttempts, t.TimeoutSeconds, next, t.MaxConcurrency, t.Priority), &out)
	if err != nil {
		return Task{}, fmt.Errorf("update task: %w", db.Translate(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return Task{}, fmt.Errorf("update task: %w", err)
	}
	return out, nil
}

// DeleteTask removes the project's task and its runs. Jobs already queued for
// its runs find nothing to do.
func DeleteTask(ctx context.Context, q db.DB, projectID, id string) error {
	if uuid.Validate(id) != nil {
		return db.ErrNotFound
	}
	tag, err := q.Exec(ctx, `DELETE FROM tasks WHERE id = $1 AND project_id = $2`, id, projectID)
	if err != nil {
		return fmt.Errorf("delete task: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return db.ErrNotFound
	}
	return nil
}

// DeactivateTask stops scheduling a task (a webhook answered 410 Gone).
// A tick claimed ahead and not yet due does not run.
func DeactivateTask(ctx context.Context, q db.DB, id string) error {
	tx, err := q.Begin(ctx)
	if err != nil {
		return fmt.Errorf("deactivate task: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `UPDATE tasks SET active = false, next_run_at = NULL, updated_at = now() WHERE id = $1`, id); err != nil {
		return fmt.Errorf("deactivate task: %w", err)
	}
	if _, err := withdrawAhead(ctx, tx, id); err != nil {
		return fmt.Errorf("deactivate task: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("deactivate task: %w", err)
	}
	return nil
}

// withdrawAhead deletes, in the caller's transaction, the task's runs
// claimed ahead of a tick that is still in the future, with their River
// jobs: a task changed (paused, rescheduled, edited) before its tick gets
// the tick decided anew, as if it had not been claimed yet. A run whose
// job a producer already fetched (the tick came) is left alone
// (deleteAheadJobs). It returns the earliest withdrawn tick (zero: none),
// for the caller to keep due.
func withdrawAhead(ctx context.Context, tx pgx.Tx, taskID string) (time.Time, error) {
	runs, err := deleteAheadJobs(ctx, tx, taskID)
	if err != nil || len(runs) == 0 {
		return time.Time{}, err
	}
	return withdrawRuns(ctx, tx, taskID, runs)
}

// IsValidation reports whether err is bad input (*ValidationError).
func IsValidation(err error) (*ValidationError, bool) {
	var v *ValidationError
	ok := errors.As(err, &v)
	return v, ok
}
