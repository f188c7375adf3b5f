-- +goose Up

-- Priority of a task's runs, River's job priority: 1 (first, the default)
-- to 4 (last). A run keeps the priority it was made with (its trigger's, or
-- its task's at the time).
ALTER TABLE tasks ADD COLUMN priority smallint NOT NULL DEFAULT 1 CHECK (priority BETWEEN 1 AND 4);
ALTER TABLE task_runs ADD COLUMN priority smallint NOT NULL DEFAULT 1 CHECK (priority BETWEEN 1 AND 4);

-- +goose Down

ALTER TABLE task_runs DROP COLUMN priority;
ALTER TABLE tasks DROP COLUMN priority;
