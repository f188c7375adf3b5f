-- +goose Up

-- A run's output: the JSON body its webhook answered its succeeded attempt
-- with, at most SWITCHBOARD_RUN_OUTPUT_MAX_BYTES; a larger body is kept as
-- a JSON string of its first bytes and flagged truncated.
ALTER TABLE task_runs ADD COLUMN output jsonb, ADD COLUMN output_truncated boolean NOT NULL DEFAULT false;

-- +goose Down

ALTER TABLE task_runs DROP COLUMN output_truncated, DROP COLUMN output;
