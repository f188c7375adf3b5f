package jobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// RescuedRun is a run whose job was running on a node that died: the
// cluster made the job available again, or discarded it (attempts spent).
type RescuedRun struct {
	RunID     string
	DeadNode  string
	Discarded bool
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
		WITH closed AS (
			-- why: a running attempt has no record yet (it is written at its
			-- end); one opened by an earlier version is closed.
			INSERT INTO task_run_attempts AS a (run_id, attempt, status, started_at, finished_at, error)
			SELECT DISTINCT ON (r.id) r.id, r.attempt, 'interrupted', coalesce(r.started_at, now()), now(),
				format('node %s stopped while running this attempt', x.node)
			FROM unnest($1::uuid[], $2::text[]) AS x(run_id, node) JOIN task_runs r ON r.id = x.run_id
			WHERE r.status = 'running' AND r.attempt > 0
			ON CONFLICT (run_id, attempt) DO UPDATE SET status = EXCLUDED.status, finished_at = EXCLUDED.finished_at, error = EXCLUDED.error
				WHERE a.finished_at IS NULL
		)
		UPDATE task_runs r
		SET status = CASE WHEN x.discarded THEN 'failed' ELSE 'queued' END,
			finished_at = CASE WHEN x.discarded THEN now() END,
			error = format('node %s stopped while running attempt %s; %s', x.node, r.attempt,
				CASE WHEN x.discarded THEN 'no attempts left' ELSE 'retrying on a live node' END)
		FROM unnest($1::uuid[], $2::text[], $3::bool[]) AS x(run_id, node, discarded), tasks t
		WHERE r.id = x.run_id AND r.status IN ('queued', 'running') AND t.id = r.task_id
		RETURNING `+runColumns+`, t.owner_id::text`, ids, nodes, discarded)
	if err != nil {
		return nil, fmt.Errorf("record rescued runs: %w", err)
	}
	changed, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OwnedRun, error) {
		var rr OwnedRun
		return rr, row.Scan(append(runDest(&rr.Run), &rr.OwnerID)...)
	})
	if err != nil {
		return nil, fmt.Errorf("record rescued runs: %w", err)
	}
	return changed, nil
}
