package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/quota"
)

// Limits of a trigger's input (docs/api.md "Tasks and runs").
const (
	// MaxIdempotencyKey is the longest idempotency key, in bytes.
	MaxIdempotencyKey = 255
	// IdempotencyWindow is how long a key answers its first run.
	IdempotencyWindow = 24 * time.Hour
	// MaxRunAtHorizon is how far ahead run_at may be.
	MaxRunAtHorizon = 30 * 24 * time.Hour
	// RunAtSkew is how far in the past run_at may be (clock skew); such a
	// run starts at once.
	RunAtSkew = 5 * time.Second
)

// TriggerRequest asks for one manual run of a task.
type TriggerRequest struct {
	ProjectID, TaskID string
	// Payload replaces the action's body (webhook) or payload (publish)
	// for this run; nil keeps the task's.
	Payload json.RawMessage
	// RunAt delays the run; nil runs it now.
	RunAt *time.Time
	// IdempotencyKey, when set, makes a repeated trigger within
	// IdempotencyWindow answer the first run instead of making another.
	IdempotencyKey string
	// RetryOf links the run to the run it retries.
	RetryOf string
	// Priority of the run, 1 to MaxPriority; 0: its task's.
	Priority int
}

// TriggerResult is the run a trigger made, or found.
type TriggerResult struct {
	Run Run
	// Replayed: the idempotency key named an earlier run; Run is that run.
	Replayed bool
	// Cancelled are the runs overlap cancel_other cancelled for this one.
	Cancelled []Run
}

func (r *TriggerRequest) validate(now time.Time) error {
	r.Payload = nullToNil(r.Payload)
	if len(r.Payload) > maxJSON {
		return invalid("payload", "payload must be at most 64 KiB of JSON")
	}
	if err := checkJSONText("payload", r.Payload); err != nil {
		return err // jsonb refuses \u0000 and lone surrogates
	}
	if len(r.IdempotencyKey) > MaxIdempotencyKey {
		return invalid("idempotency_key", "idempotency_key must be at most %d bytes", MaxIdempotencyKey)
	}
	if strings.HasPrefix(r.IdempotencyKey, retryKeyPrefix) && r.RetryOf == "" {
		return invalid("idempotency_key", "idempotency_key may not start with %q: retries use those keys", retryKeyPrefix)
	}
	if strings.ContainsFunc(r.IdempotencyKey, unicode.IsControl) {
		return invalid("idempotency_key", "idempotency_key cannot contain control characters")
	}
	if r.Priority < 0 || r.Priority > MaxPriority {
		return invalid("priority", "priority must be 1 to %d", MaxPriority)
	}
	if r.RunAt == nil {
		return nil
	}
	switch {
	case r.RunAt.Before(now.Add(-RunAtSkew)):
		return invalid("run_at", "run_at is in the past; omit it to run now")
	case r.RunAt.After(now.Add(MaxRunAtHorizon)):
		return invalid("run_at", "run_at must be within %d days", int(MaxRunAtHorizon/(24*time.Hour)))
	case !r.RunAt.After(now):
		r.RunAt = nil
	}
	return nil
}

// Trigger creates a manual run of the project's task and its River job in one
// transaction. The task row is locked first, so the overlap check and the
// insert cannot interleave with a claim or another trigger. With an
// idempotency key, the key is claimed (INSERT … ON CONFLICT on its primary
// key) before the run is made: of any number of concurrent triggers with
// one key, on any replicas, one makes the run and the others answer it.
// A run that would take the project past lim.QueuedRuns runs not yet final
// is refused with a quota.ExceededError (a replay is not refused: it makes
// nothing).
func Trigger(ctx context.Context, q db.DB, client *river.Client[pgx.Tx], lim quota.Limits, req TriggerRequest) (TriggerResult, error) {
	if uuid.Validate(req.TaskID) != nil {
		return TriggerResult{}, db.ErrNotFound
	}
	if err := req.validate(time.Now()); err != nil {
		return TriggerResult{}, err
	}
	tx, err := q.Begin(ctx)
	if err != nil {
		return TriggerResult{}, fmt.Errorf("trigger run: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var maxAttempts int
	var overlap string
	err = tx.QueryRow(ctx, `SELECT max_attempts, overlap FROM tasks WHERE id = $1 AND project_id = $2 FOR UPDATE`, req.TaskID, req.ProjectID).
		Scan(&maxAttempts, &overlap)
	if err != nil {
		return TriggerResult{}, db.Translate(err)
	}
	runID := uuid.NewString()
	if req.IdempotencyKey != "" {
		first, err := claimKey(ctx, tx, req.TaskID, req.IdempotencyKey, runID)
		if err != nil {
			return TriggerResult{}, err
		}
		if first != runID {
			run, err := GetRun(ctx, tx, req.ProjectID, first)
			return TriggerResult{Run: run, Replayed: true}, err
		}
	}
	var cancelled []Run
	if overlap == OverlapCancelOther {
		if cancelled, err = cancelActiveRuns(ctx, tx, client, []string{req.TaskID}); err != nil {
			return TriggerResult{}, err
		}
	}
	if err := takeQueuedRuns(ctx, tx, lim, req.ProjectID, 1); err != nil {
		return TriggerResult{}, err
	}
	run, err := insertManualRun(ctx, tx, runID, req)
	if err != nil {
		return TriggerResult{}, err
	}
	if err := enqueueRun(ctx, tx, client, run, req.ProjectID, maxAttempts, req.RunAt); err != nil {
		return TriggerResult{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return TriggerResult{}, fmt.Errorf("trigger run: %w", err)
	}
	return TriggerResult{Run: run, Cancelled: cancelled}, nil
}

// claimKey takes the idempotency key for runID and returns runID, or the
// run that holds the key (younger than IdempotencyWindow).
func claimKey(ctx context.Context, tx pgx.Tx, taskID, key, runID string) (string, error) {
	var got string
	err := tx.QueryRow(ctx, `
		INSERT INTO task_run_keys AS k (task_id, key, run_id) VALUES ($1, $2, $3)
		-- why: an expired key is taken over; a live one is left alone and
		-- RETURNING yields nothing, so the caller reads its run.
		ON CONFLICT (task_id, key) DO UPDATE SET run_id = EXCLUDED.run_id, created_at = now()
			WHERE k.created_at <= now() - make_interval(secs => $4)
		RETURNING run_id::text`, taskID, key, runID, IdempotencyWindow.Seconds()).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		err = tx.QueryRow(ctx, `SELECT run_id::text FROM task_run_keys WHERE task_id = $1 AND key = $2`, taskID, key).Scan(&got)
	}
	if err != nil {
		return "", fmt.Errorf("trigger run: idempotency key: %w", err)
	}
	return got, nil
}

// enqueueRun inserts the run's River job, due at runAt (nil: now). A
// delayed job goes through InsertAvailable: it is inserted available with
// scheduled_at = run_at (no producer fetches it before), and the
// TasksChannel notice, sent at commit, wakes every replica's claim loop,
// whose idle question finds run_at and has the producers notified at it
// (Claimer.FetchableAt). A client without the middleware inserts it
// scheduled: River's scheduler makes it available up to 5 s early and the run
// starts at the first fetch poll after run_at, as in poll-only mode.
func enqueueRun(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], run Run, project string, maxAttempts int, runAt *time.Time) error {
	opts := runInsertOpts(project, maxAttempts, run.Priority)
	if runAt != nil {
		opts.ScheduledAt = *runAt
		ctx, _ = markInsertAvailable(ctx)
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, TasksChannel); err != nil {
			return fmt.Errorf("trigger run: notify claim loops: %w", err)
		}
	}
	if _, err := client.InsertTx(ctx, tx, RunArgs{RunID: run.ID, TaskID: run.TaskID}, opts); err != nil {
		return fmt.Errorf("trigger run: enqueue: %w", err)
	}
	return nil
}

// jsonArg passes a JSON document as text to a $n::jsonb parameter; nil is
// NULL.
func jsonArg(m json.RawMessage) any {
	if len(m) == 0 {
		return nil
	}
	return string(m)
}
