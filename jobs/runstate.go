package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/db"
)

// Run statuses: the states of the machine below.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// RunStatuses is every run status, in the order a run goes through them.
var RunStatuses = []string{StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled}

// A run's state machine: every write of task_runs and task_run_attempts.
//
//	inserted queued  by a claimed tick (insertTickRuns), a trigger or retry
//	                 (insertManualRun), a batch trigger (insertManualRuns),
//	                 a backfill (insertBackfillRuns)
//	queued → running                         startRuns (StartRun, RunWriter)
//	running → succeeded, failed, or queued   finishAttempts (FinishAttempt,
//	          for a retry                    RunWriter)
//	queued, running → cancelled              cancelRuns (CancelRun, cancel_other)
//	running → queued or failed               RunsRescued (its node died)
//	queued, running → finished               ReconcileOrphanedRuns (its job
//	                                         ended without it)
//	queued (claimed ahead) → deleted         withdrawRuns
//	finished → deleted                       PruneRuns
//
// An attempt is written to task_run_attempts once, when it ends: by its
// outcome (recordAttempts), or by whatever ends it first (endAttempts: a
// cancel, a rescue, a reconcile, a later attempt starting). Until then the
// run row (running, attempt, started_at) is the attempt in progress.

// endAttempts is the CTE that records attempts as ended now, one per row
// of the query ended, whose columns are (run_id, attempt, status,
// started_at, error, timed); timed: the record carries its duration. A
// record that exists already keeps its outcome once finished (whatever
// ended the attempt first wins); one still open (finished_at NULL) is
// closed.
func endAttempts(ended string) string {
	return `ended AS (
			INSERT INTO task_run_attempts AS a (run_id, attempt, status, started_at, finished_at, duration_ms, error)
			SELECT e.run_id, e.attempt, e.status, coalesce(e.started_at, now()), now(),
				CASE WHEN e.timed THEN (EXTRACT(EPOCH FROM now() - coalesce(e.started_at, now())) * 1000)::int END, e.error
			FROM (` + ended + `) AS e(run_id, attempt, status, started_at, error, timed)
			ON CONFLICT (run_id, attempt) DO UPDATE SET status = EXCLUDED.status, finished_at = EXCLUDED.finished_at, error = EXCLUDED.error,
				duration_ms = CASE WHEN EXCLUDED.duration_ms IS NULL THEN a.duration_ms
					ELSE (EXTRACT(EPOCH FROM now() - a.started_at) * 1000)::int END
				WHERE a.finished_at IS NULL
		)`
}

// recordAttempts is the CTE of finishAttempts that writes the attempts of
// input (run_id, attempt, attempt_status, started_at, duration_ms,
// http_status, error, excerpt) at their end, with their outcome. A record
// that exists already keeps its outcome once finished (a cancel or a
// rescue recorded it first); an open one is closed.
const recordAttempts = `recorded AS (
			INSERT INTO task_run_attempts AS a (run_id, attempt, status, started_at, finished_at, duration_ms, http_status, error, response_excerpt)
			SELECT i.run_id, i.attempt, i.attempt_status, coalesce(i.started_at, now() - make_interval(secs => i.duration_ms / 1000.0)),
				now(), i.duration_ms, i.http_status, i.error, i.excerpt
			FROM input i
			-- why: a run deleted meanwhile (its task deleted) has nothing to record.
			WHERE EXISTS (SELECT 1 FROM task_runs x WHERE x.id = i.run_id)
			ON CONFLICT (run_id, attempt) DO UPDATE SET status = EXCLUDED.status, finished_at = EXCLUDED.finished_at,
				duration_ms = EXCLUDED.duration_ms, http_status = EXCLUDED.http_status, error = EXCLUDED.error,
				response_excerpt = EXCLUDED.response_excerpt
				WHERE a.finished_at IS NULL
		)`

// overlapAdmits is the SQL condition under which a new run of a task may be
// inserted, given the task's overlap column and task id expressions:
// skip — no run queued or running; buffer_one — no run waiting (queued,
// never attempted); allow and cancel_other — always (cancel_other has
// cancelled the active runs first). Active runs are found through the
// index of unfinished runs (finished_at IS NULL; migration 00012).
func overlapAdmits(overlap, taskID string) string {
	return `(` + overlap + ` IN ('allow', 'cancel_other')
		OR (` + overlap + ` = 'skip' AND NOT EXISTS (
			SELECT 1 FROM task_runs a WHERE a.task_id = ` + taskID + ` AND a.finished_at IS NULL AND a.status IN ('queued', 'running')))
		OR (` + overlap + ` = 'buffer_one' AND NOT EXISTS (
			SELECT 1 FROM task_runs a WHERE a.task_id = ` + taskID + ` AND a.finished_at IS NULL AND a.status = 'queued' AND a.attempt = 0)))`
}

// insertTickRuns inserts the runs of claimed ticks (task ids, ticks,
// ticks folded into each) that overlap admits; a tick that has a run
// already gets none. The claim holds the tasks' row locks, so the overlap
// check cannot race a concurrent insert.
func insertTickRuns(ctx context.Context, tx pgx.Tx, ids []string, ticks []time.Time, skipped []int32) ([]Run, error) {
	rows, err := tx.Query(ctx, `
		INSERT INTO task_runs AS r (task_id, trigger, scheduled_for, skipped_ticks, priority)
		SELECT i.task_id, 'schedule', i.tick, i.skipped, t.priority
		FROM unnest($1::uuid[], $2::timestamptz[], $3::int[]) AS i(task_id, tick, skipped)
			JOIN tasks t ON t.id = i.task_id
		WHERE `+overlapAdmits("t.overlap", "i.task_id")+`
		ON CONFLICT (task_id, scheduled_for) WHERE trigger = 'schedule' DO NOTHING
		RETURNING `+runColumns, ids, ticks, skipped)
	if err != nil {
		return nil, fmt.Errorf("claim: insert runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("claim: insert runs: %w", err)
	}
	return runs, nil
}

// insertManualRun inserts a triggered run, if the task's overlap admits
// it (else ErrRunActive), and counts it on the task.
func insertManualRun(ctx context.Context, tx pgx.Tx, runID string, req TriggerRequest) (Run, error) {
	var run Run
	err := tx.QueryRow(ctx, `
		WITH task AS (
			UPDATE tasks SET run_count = run_count + 1, last_run_at = now() WHERE id = $2 RETURNING overlap, priority
		)
		INSERT INTO task_runs AS r (id, task_id, trigger, scheduled_for, payload, retry_of, priority)
		SELECT $1, $2, 'manual', coalesce($3::timestamptz, now()), $4::jsonb, $5::uuid, coalesce($6, task.priority) FROM task
		-- why: conditional insert, no read-then-write; the task row lock
		-- serialises it with claims and other triggers.
		WHERE `+overlapAdmits("task.overlap", "$2")+`
		RETURNING `+runColumns, runID, req.TaskID, req.RunAt, jsonArg(req.Payload), nilIfZero(req.RetryOf), nilIfZero(req.Priority)).Scan(runDest(&run)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, ErrRunActive
	}
	if err != nil {
		return Run{}, fmt.Errorf("trigger run: %w", err)
	}
	return run, nil
}

// insertManualRuns inserts the runs of a batch trigger (ids[i] for
// reqs[i]), whose overlap the caller decided under the task's row lock,
// and counts them on the task. It returns them in the order of ids.
func insertManualRuns(ctx context.Context, tx pgx.Tx, taskID string, ids []string, reqs []TriggerRequest) ([]Run, error) {
	runAt := make([]*time.Time, len(reqs))
	payloads := make([]*string, len(reqs))
	priorities := make([]*int, len(reqs))
	for i, r := range reqs {
		runAt[i], priorities[i] = r.RunAt, nilIfZero(r.Priority)
		if len(r.Payload) > 0 {
			payloads[i] = new(string(r.Payload))
		}
	}
	rows, err := tx.Query(ctx, `
		WITH task AS (
			UPDATE tasks SET run_count = run_count + cardinality($2::uuid[]), last_run_at = now() WHERE id = $1 RETURNING priority
		), inserted AS (
			INSERT INTO task_runs AS r (id, task_id, trigger, scheduled_for, payload, priority)
			SELECT i.id, $1, 'manual', coalesce(i.run_at, now()), i.payload::jsonb, coalesce(i.priority, task.priority)
			FROM unnest($2::uuid[], $3::timestamptz[], $4::text[], $5::int[]) AS i(id, run_at, payload, priority), task
			RETURNING r.*
		)
		SELECT `+runColumns+` FROM inserted r JOIN unnest($2::uuid[]) WITH ORDINALITY AS o(id, n) ON o.id = r.id
		ORDER BY o.n`, taskID, ids, runAt, payloads, priorities)
	if err != nil {
		return nil, fmt.Errorf("trigger batch: insert runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) {
		var r Run
		return r, row.Scan(runDest(&r)...)
	})
	if err != nil {
		return nil, fmt.Errorf("trigger batch: insert runs: %w", err)
	}
	return runs, nil
}

// insertBackfillRuns inserts a scheduled run for each tick that has none
// and counts them on the task; it returns them oldest first.
func insertBackfillRuns(ctx context.Context, tx pgx.Tx, taskID string, ticks []time.Time) ([]Run, error) {
	rows, err := tx.Query(ctx, `
		WITH inserted AS (
			INSERT INTO task_runs AS r (task_id, trigger, scheduled_for, priority, backfill)
			SELECT $1, 'schedule', tick, (SELECT priority FROM tasks WHERE id = $1), true FROM unnest($2::timestamptz[]) AS tick
			-- why: the tick key makes every tick run once, claimed or backfilled.
			ON CONFLICT (task_id, scheduled_for) WHERE trigger = 'schedule' DO NOTHING
			RETURNING `+runColumns+`
		),
		counted AS (
			UPDATE tasks SET run_count = run_count + (SELECT count(*) FROM inserted) WHERE id = $1
		)
		SELECT * FROM inserted ORDER BY scheduled_for`, taskID, ticks)
	if err != nil {
		return nil, fmt.Errorf("backfill: %w", err)
	}
	runs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("backfill: %w", err)
	}
	return runs, nil
}

// startRunsSQL marks the runs of $1 (ids) running on their attempts ($2),
// each if it is queued or running (a worker that stopped left it so), and
// returns them with their tasks (run_uuid first). The attempt a run was
// left running on is recorded as interrupted. unlimited: only runs whose
// task limits no concurrency (see takeSlot); a run started alone took its
// slot first.
func startRunsSQL(unlimited bool) string {
	var only string
	if unlimited {
		only = `
				-- why: no concurrency limit (see takeSlot); limited runs start alone.
				AND t.overlap NOT IN ('buffer_one', 'cancel_other') AND t.max_concurrency IS NULL`
	}
	return `
		WITH input AS (
			SELECT DISTINCT ON (run_id) run_id, attempt FROM unnest($1::uuid[], $2::int[]) AS i(run_id, attempt)
		),
		prev AS (
			-- why: the statement's snapshot, before started changes the rows.
			SELECT r.id, r.attempt, r.started_at FROM task_runs r JOIN input i ON r.id = i.run_id
			WHERE r.status = 'running' AND r.attempt <> i.attempt
		),
		started AS (
			-- clock_timestamp: the time the run was admitted, after any wait
			-- for the slot lock (now() is when the transaction began).
			UPDATE task_runs r SET status = 'running', attempt = i.attempt, started_at = clock_timestamp(), finished_at = NULL, next_attempt_at = NULL
			FROM input i, tasks t
			WHERE r.id = i.run_id AND t.id = r.task_id AND r.status IN ('queued', 'running')` + only + `
			RETURNING r.id AS run_uuid, ` + runColumns + `, t.signing_secret,
				coalesce(CASE WHEN t.previous_secret_expires_at > now() THEN t.previous_signing_secret END, ''), ` + taskColumns + `
		),
		` + endAttempts(`SELECT p.id, p.attempt, 'interrupted', p.started_at,
				'the worker of this attempt stopped before recording its outcome; the run was started again', false
			FROM prev p JOIN started s ON s.run_uuid = p.id`) + `
		SELECT * FROM started`
}

// startDest scans a row of startRunsSQL into rc.
func startDest(rc *RunContext) []any {
	var skip any
	dest := append([]any{&skip}, runDest(&rc.Run)...)
	dest = append(dest, &rc.SigningSecret, &rc.PreviousSigningSecret)
	return append(dest, taskDest(&rc.Task)...)
}

// StartRun marks a queued (or interrupted running) run as running for the
// given attempt and returns the run with its task. The attempt's record is
// written once, when it ends (FinishAttempt, a cancel, a rescue); until
// then the run row (running, attempt, started_at) is the record of the
// attempt in progress (ListAttempts shows it). A run found running on
// another attempt lost its worker before the outcome was written: that
// attempt is recorded as interrupted here. db.ErrNotFound means there is
// nothing to do: the task was deleted or the run already finished or was
// cancelled. ErrNoSlot means it must wait for a slot.
func StartRun(ctx context.Context, q db.DB, runID string, attempt int) (RunContext, error) {
	tx, err := q.Begin(ctx)
	if err != nil {
		return RunContext{}, fmt.Errorf("start run: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := takeSlot(ctx, tx, runID); err != nil {
		return RunContext{}, err
	}
	var rc RunContext
	err = tx.QueryRow(ctx, startRunsSQL(false), []string{runID}, []int32{int32(attempt)}).Scan(startDest(&rc)...)
	if err != nil {
		return RunContext{}, db.Translate(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return RunContext{}, fmt.Errorf("start run: %w", err)
	}
	return rc, nil
}

// finishAttemptsSQL records the outcomes of input (see finishArgs) and
// updates each run on the conditions FinishAttempt states.
const finishAttemptsSQL = `
		WITH input AS (
			SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::int[], $9::timestamptz[], $10::timestamptz[],
				$11::text[], $12::bool[])
				AS i(run_id, status, http_status, error, excerpt, duration_ms, attempt_status, attempt, next_attempt_at, started_at, output, output_truncated)
		),
		` + recordAttempts + `
		UPDATE task_runs r SET status = i.status, http_status = i.http_status, error = i.error, response_excerpt = i.excerpt,
			duration_ms = i.duration_ms,
			finished_at = CASE WHEN i.status IN ('succeeded', 'failed', 'cancelled') THEN now() END,
			next_attempt_at = i.next_attempt_at, output = i.output::jsonb, output_truncated = i.output_truncated
		FROM input i
		-- why: the attempt too, so a worker its node was declared dead under
		-- (its run rescued and started again elsewhere) cannot overwrite the
		-- newer attempt's run.
		WHERE r.id = i.run_id AND r.status <> 'cancelled' AND r.attempt = i.attempt
		RETURNING ` + runColumns

// finishArgs are finishAttemptsSQL's arguments for in, one array each.
func finishArgs(in []finishRequest) []any {
	n := len(in)
	ids, statuses, attemptStatuses := make([]string, n), make([]string, n), make([]string, n)
	httpStatuses, attempts := make([]*int32, n), make([]int32, n)
	errs, excerpts := make([]*string, n), make([]*string, n)
	durations, nexts, starts := make([]int64, n), make([]*time.Time, n), make([]*time.Time, n)
	outputs, truncated := make([]*string, n), make([]bool, n)
	for i, r := range in {
		o := r.o
		ids[i], statuses[i], attemptStatuses[i], attempts[i] = r.runID, o.Status, o.attemptStatus(), int32(o.Attempt)
		httpStatuses[i], errs[i], excerpts[i] = nilIfZero(int32(o.HTTPStatus)), nilIfZero(o.Error), nilIfZero(o.Excerpt)
		durations[i], nexts[i], starts[i] = o.Duration.Milliseconds(), o.NextAttemptAt, nilIfZero(o.StartedAt)
		if o.Status == StatusSucceeded && len(o.Output) > 0 {
			outputs[i], truncated[i] = new(string(o.Output)), o.OutputTruncated
		}
	}
	return []any{ids, statuses, httpStatuses, errs, excerpts, durations, attemptStatuses, attempts, nexts, starts, outputs, truncated}
}

// FinishAttempt records an attempt's outcome: it writes the attempt's
// record (started at o.StartedAt, finished now) and updates the run, and
// returns the run. A run going back to queued keeps its error so users
// see why it is retried. A cancelled run stays cancelled (db.ErrNotFound),
// and so does its attempt (the cancel recorded it); so does a run already
// on a later attempt. An attempt recorded already (cancelled,
// interrupted) keeps its record.
func FinishAttempt(ctx context.Context, q db.DB, runID string, o Outcome) (Run, error) {
	var r Run
	err := q.QueryRow(ctx, finishAttemptsSQL, finishArgs([]finishRequest{{runID: runID, o: o}})...).Scan(runDest(&r)...)
	if err != nil {
		return Run{}, fmt.Errorf("finish run attempt: %w", db.Translate(err))
	}
	return r, nil
}

// cancelRuns cancels the queued or running runs among ids whose rows the
// caller's transaction has locked, and records their running attempts as
// cancelled. Their River jobs are the caller's to cancel.
func cancelRuns(ctx context.Context, tx pgx.Tx, ids []string) ([]Run, error) {
	rows, err := tx.Query(ctx, `
		WITH `+endAttempts(`SELECT r.id, r.attempt, 'cancelled', r.started_at, 'cancelled on request', true
			FROM task_runs r WHERE r.id = ANY($1::uuid[]) AND r.status = 'running' AND r.attempt > 0`)+`
		UPDATE task_runs r SET status = 'cancelled', finished_at = now(), next_attempt_at = NULL,
			error = 'cancelled on request'
		WHERE r.id = ANY($1::uuid[])
		RETURNING `+runColumns, ids)
	if err != nil {
		return nil, fmt.Errorf("cancel run: %w", err)
	}
	runs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("cancel run: %w", err)
	}
	return runs, nil
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
		runs, err := cancelRuns(ctx, tx, []string{id})
		if err != nil {
			return nil, err
		}
		out = append(out, runs...)
	}
	return out, nil
}

// RunsRescued records on the runs what happened to their jobs: back to
// queued (a live node retries it) or failed (no attempts left), with the
// reason in error, and returns them as changed. Runs already finished are
// left alone.
func RunsRescued(ctx context.Context, q db.DB, runs []RescuedRun) ([]OwnedRun, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	ids, nodes, discarded := make([]string, len(runs)), make([]string, len(runs)), make([]bool, len(runs))
	for i, r := range runs {
		ids[i], nodes[i], discarded[i] = r.RunID, r.DeadNode, r.Discarded
	}
	rows, err := q.Query(ctx, `
		WITH `+endAttempts(`SELECT DISTINCT ON (r.id) r.id, r.attempt, 'interrupted', r.started_at,
				format('node %s stopped while running this attempt', x.node), false
			FROM unnest($1::uuid[], $2::text[]) AS x(run_id, node) JOIN task_runs r ON r.id = x.run_id
			WHERE r.status = 'running' AND r.attempt > 0`)+`
		UPDATE task_runs r
		SET status = CASE WHEN x.discarded THEN 'failed' ELSE 'queued' END,
			finished_at = CASE WHEN x.discarded THEN now() END,
			error = format('node %s stopped while running attempt %s; %s', x.node, r.attempt,
				CASE WHEN x.discarded THEN 'no attempts left' ELSE 'retrying on a live node' END)
		FROM unnest($1::uuid[], $2::text[], $3::bool[]) AS x(run_id, node, discarded), tasks t
		WHERE r.id = x.run_id AND r.status IN ('queued', 'running') AND t.id = r.task_id
		RETURNING `+runColumns+`, t.project_id::text`, ids, nodes, discarded)
	if err != nil {
		return nil, fmt.Errorf("record rescued runs: %w", err)
	}
	changed, err := pgx.CollectRows(rows, scanOwnedRun)
	if err != nil {
		return nil, fmt.Errorf("record rescued runs: %w", err)
	}
	return changed, nil
}

// ReconcileGrace is how old a run must be before reconciliation looks at
// it: its job is inserted in the same transaction, so a younger run's job
// always exists; the grace only keeps the query off brand-new rows.
const ReconcileGrace = 30 * time.Second

// ReconcileOrphanedRuns finishes runs left queued or running although their
// River job is finalised (the worker could not record the last outcome) or
// gone (River's cleaner deleted it): completed → succeeded, discarded or
// gone → failed, cancelled → cancelled, each with an error saying so, and
// closes their open attempts. A run whose job is still live is left alone.
// Rows other transactions hold are skipped (the next pass takes them).
func ReconcileOrphanedRuns(ctx context.Context, q db.DB, limit int) ([]OwnedRun, error) {
	rows, err := q.Query(ctx, `
		WITH orphans AS (
			SELECT r.id, j.state, r.status, r.attempt, r.started_at
			FROM task_runs r
			LEFT JOIN LATERAL (
				`+lastRunJobSQL("r.id")+`
			) j ON true
			WHERE r.finished_at IS NULL AND r.status IN ('queued', 'running') AND r.created_at < now() - make_interval(secs => $2)
				AND (j.state IS NULL OR j.state IN ('completed', 'discarded', 'cancelled'))
			LIMIT $1
			FOR UPDATE OF r SKIP LOCKED
		),
		`+endAttempts(`SELECT o.id, o.attempt, 'interrupted', o.started_at, 'the outcome of this attempt was never recorded', false
			FROM orphans o WHERE o.status = 'running' AND o.attempt > 0`)+`
		UPDATE task_runs r SET
			status = CASE o.state WHEN 'completed' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END,
			finished_at = now(), next_attempt_at = NULL,
			error = CASE
				WHEN o.state IS NULL THEN 'reconciled: the run''s job no longer exists; its outcome was never recorded'
				ELSE format('reconciled: the run''s job ended %s but its outcome was never recorded', o.state) END
		FROM orphans o, tasks t
		WHERE r.id = o.id AND t.id = r.task_id
		RETURNING `+runColumns+`, t.project_id::text`, limit, ReconcileGrace.Seconds())
	if err != nil {
		return nil, fmt.Errorf("reconcile runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanOwnedRun)
	if err != nil {
		return nil, fmt.Errorf("reconcile runs: %w", err)
	}
	return out, nil
}

// withdrawRuns deletes the task's runs among ids (claimed ahead, their
// jobs deleted) and takes them off its run count; it returns the earliest
// tick among them (zero: none).
func withdrawRuns(ctx context.Context, tx pgx.Tx, taskID string, ids []string) (time.Time, error) {
	var earliest *time.Time
	err := tx.QueryRow(ctx, `
		WITH runs_gone AS (
			DELETE FROM task_runs WHERE id = ANY($2::uuid[]) RETURNING scheduled_for
		),
		counted AS (
			UPDATE tasks SET run_count = run_count - (SELECT count(*) FROM runs_gone)
			WHERE id = $1 AND EXISTS (SELECT 1 FROM runs_gone)
		)
		SELECT min(scheduled_for) FROM runs_gone`, taskID, ids).Scan(&earliest)
	if err != nil {
		return time.Time{}, fmt.Errorf("withdraw runs claimed ahead: %w", err)
	}
	if earliest == nil {
		return time.Time{}, nil
	}
	return *earliest, nil
}

// PruneRuns deletes finished runs older than retention, in batches so a
// large backlog never holds long locks. It returns how many it deleted.
func PruneRuns(ctx context.Context, q db.DB, retention time.Duration) (int64, error) {
	var total int64
	for {
		tag, err := q.Exec(ctx, `
			DELETE FROM task_runs WHERE id IN (
				SELECT id FROM task_runs WHERE finished_at < now() - make_interval(secs => $1) LIMIT 5000)`, retention.Seconds())
		if err != nil {
			return total, fmt.Errorf("prune runs: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 5000 {
			return total, nil
		}
	}
}

func scanRun(row pgx.CollectableRow) (Run, error) {
	var r Run
	return r, row.Scan(runDest(&r)...)
}

func scanOwnedRun(row pgx.CollectableRow) (OwnedRun, error) {
	var rr OwnedRun
	return rr, row.Scan(append(runDest(&rr.Run), &rr.ProjectID)...)
}
