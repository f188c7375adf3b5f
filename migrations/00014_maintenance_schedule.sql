-- +goose Up
-- The schedule of the periodic housekeeping (workers.Maintenance): one row
-- per task, next_at the start of its next period. Every worker replica runs
-- a maintenance loop (workers.MaintenanceLoop) that, when a row falls due,
-- claims it with FOR UPDATE SKIP LOCKED and moves next_at one period on in
-- the same statement, so each period goes to exactly one replica without a
-- leader. It replaces River's periodic jobs, which needed River's leader.
CREATE TABLE maintenance_schedule (
    name    text        PRIMARY KEY,
    next_at timestamptz NOT NULL
);

-- River's periodic maintenance jobs are no longer worked: no producer
-- fetches the "maintenance" queue any more. Running ones finish on the
-- replica that runs them.
DELETE FROM river_job WHERE kind = 'maintenance' AND state <> 'running';

-- +goose Down
-- (The deleted River jobs are not restored: an older version's leader
-- inserts new ones at its next period.)
DROP TABLE maintenance_schedule;
