package jobs

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// TestRunStartIsHOT: marking a run running rewrites no index entry (no
// index of task_runs mentions status; migration 00012), so concurrent
// starts cost a heap write each and nothing more.
func TestRunStartIsHOT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.NewTx(t)
	owner := dbtest.User(t, tx, nil).ID
	task := dbtest.Task(t, tx, &dbtest.TaskOpts{OwnerID: owner})
	var runID string
	if err := tx.QueryRow(ctx, `INSERT INTO task_runs (task_id, trigger, scheduled_for) VALUES ($1, 'manual', now()) RETURNING id::text`, task.ID).Scan(&runID); err != nil {
		t.Fatal(err)
	}
	if _, err := StartRun(ctx, tx, runID, 1); err != nil {
		t.Fatal(err)
	}
	var updated, hot int
	err := tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated('task_runs'::regclass), pg_stat_get_xact_tuples_hot_updated('task_runs'::regclass)`).Scan(&updated, &hot)
	if err != nil {
		t.Fatal(err)
	}
	if updated != 1 || hot != 1 {
		t.Fatalf("start: %d updates of task_runs, %d of them HOT; want 1 and 1", updated, hot)
	}
}

// TestListRunsPlans: with a generic plan (what a prepared statement ends up
// with), a task's run listing reads the task's index, and its failed-runs
// listing keeps to it too, rather than every run of the owner.
func TestListRunsPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		filter RunFilter
		index  string
	}{
		{"one task's runs", RunFilter{TaskID: "00000000-0000-0000-0000-000000000001"}, "task_runs_task_idx"},
		{"one task's failed runs", RunFilter{TaskID: "00000000-0000-0000-0000-000000000001", Status: StatusFailed}, "task_runs_task_idx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tx := dbtest.NewTx(t)
			// A history worth an index: 50 tasks with 400 runs each.
			owner := dbtest.User(t, tx, nil).ID
			_, err := tx.Exec(ctx, `
				WITH t AS (
					INSERT INTO tasks (owner_id, name, schedule, action, signing_secret)
					SELECT $1, 'task-' || i, '@every 1h', '{"type":"publish","event":"tick"}', 'whsec_x' FROM generate_series(1, 50) i
					RETURNING id)
				INSERT INTO task_runs (task_id, trigger, scheduled_for, status, finished_at, error)
				SELECT t.id, 'manual', now(), 'failed', now(), 'boom' FROM t, generate_series(1, 400)`, owner)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `ANALYZE tasks, task_runs`); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
				t.Fatal(err)
			}
			// Prepared statements outlive the transaction: a unique name,
			// deallocated at the end.
			name := pgx.Identifier{"list_runs_" + strings.ReplaceAll(tc.name, " ", "_")}.Sanitize()
			if _, err := tx.Exec(ctx, `PREPARE `+name+` AS `+listRunsSQL(tc.filter)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = tx.Exec(context.Background(), `DEALLOCATE `+name) })
			rows, err := tx.Query(ctx, `EXPLAIN EXECUTE `+name+`('00000000-0000-0000-0000-000000000002', 'infinity', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 51, $1, $2)`,
				pgx.QueryExecModeSimpleProtocol, tc.filter.TaskID, tc.filter.Status)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			if text := strings.Join(plan, "\n"); !strings.Contains(text, tc.index) {
				t.Fatalf("plan does not use %s:\n%s", tc.index, text)
			}
		})
	}
}
