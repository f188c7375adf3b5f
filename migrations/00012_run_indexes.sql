-- +goose Up
-- A run's start (queued → running, and a retry starting) is a HOT update:
-- no index of task_runs mentions status any more, and pages keep room
-- for the new row versions (fillfactor). Every status change used to
-- rewrite the entries of every index of the run; the finish still does
-- once (finished_at leaves the unfinished index).
--
-- Every writer sets finished_at exactly when a run reaches succeeded,
-- failed or cancelled, so "finished_at IS NULL" is "queued or running":
-- the queries on active runs say both (the status for the meaning, the
-- finished_at for the index). A failed run always carries its error.
--
-- Plain CREATE INDEX, in the migration's transaction: CONCURRENTLY would
-- wait for the other replicas' statements waiting on the migration lock
-- (TestFourReplicasStartAtOnceOnAnEmptyDatabase hung on it).

-- The overlap check, slot counting and reconciliation: a task's active runs.
CREATE INDEX task_runs_unfinished_idx ON task_runs (task_id) WHERE finished_at IS NULL;
DROP INDEX task_runs_active_idx;
-- The dead-letter view (failed runs, newest first): finished runs with an
-- error (failed, cancelled, some reconciled), status checked on the row.
CREATE INDEX task_runs_errored_idx ON task_runs (created_at DESC, id DESC)
    WHERE finished_at IS NOT NULL AND error IS NOT NULL;
DROP INDEX task_runs_failed_idx;
-- Room on each page for a run's next versions (start, finish), so the
-- updates stay on the page (HOT) instead of moving the row.
ALTER TABLE task_runs SET (fillfactor = 70);
ALTER TABLE task_run_attempts SET (fillfactor = 80);

-- +goose Down
CREATE INDEX task_runs_active_idx ON task_runs (task_id) WHERE status IN ('queued', 'running');
DROP INDEX task_runs_unfinished_idx;
CREATE INDEX task_runs_failed_idx ON task_runs (created_at DESC, id DESC) WHERE status = 'failed';
DROP INDEX task_runs_errored_idx;
ALTER TABLE task_runs RESET (fillfactor);
ALTER TABLE task_run_attempts RESET (fillfactor);
