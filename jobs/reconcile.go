package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

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
		closed AS (
			-- why: a running attempt has no record yet (it is written at its
			-- end); one opened by an earlier version is closed.
			INSERT INTO task_run_attempts AS a (run_id, attempt, status, started_at, finished_at, error)
			SELECT o.id, o.attempt, 'interrupted', coalesce(o.started_at, now()), now(), 'the outcome of this attempt was never recorded'
			FROM orphans o WHERE o.status = 'running' AND o.attempt > 0
			ON CONFLICT (run_id, attempt) DO UPDATE SET status = EXCLUDED.status, finished_at = EXCLUDED.finished_at, error = EXCLUDED.error
				WHERE a.finished_at IS NULL
		)
		UPDATE task_runs r SET
			status = CASE o.state WHEN 'completed' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END,
			finished_at = now(), next_attempt_at = NULL,
			error = CASE
				WHEN o.state IS NULL THEN 'reconciled: the run''s job no longer exists; its outcome was never recorded'
				ELSE format('reconciled: the run''s job ended %s but its outcome was never recorded', o.state) END
		FROM orphans o, tasks t
		WHERE r.id = o.id AND t.id = r.task_id
		RETURNING `+runColumns+`, t.owner_id::text`, limit, ReconcileGrace.Seconds())
	if err != nil {
		return nil, fmt.Errorf("reconcile runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OwnedRun, error) {
		var rr OwnedRun
		return rr, row.Scan(append(runDest(&rr.Run), &rr.OwnerID)...)
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile runs: %w", err)
	}
	return out, nil
}
