-- +goose Up
-- Whether a run was made by a backfill: the backfill_ticks quota counts a
-- project's backfilled runs not yet final. A constant default: adding the
-- column rewrites nothing.
ALTER TABLE task_runs ADD COLUMN backfill boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE task_runs DROP COLUMN backfill;
