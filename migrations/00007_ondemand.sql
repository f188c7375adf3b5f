-- +goose Up
-- On-demand jobs (docs/jobs.md "On-demand runs"): tasks without a schedule,
-- runs with their own input, idempotency keys, every attempt recorded,
-- retries of failed runs linked to the original.

-- NULL: an on-demand task, run only when triggered (next_run_at stays NULL).
ALTER TABLE tasks ALTER COLUMN schedule DROP NOT NULL;

-- buffer_one: at most one run waits behind the running one; cancel_other:
-- a new run cancels the active one.
ALTER TABLE tasks DROP CONSTRAINT tasks_overlap_check,
    ADD CONSTRAINT tasks_overlap_check CHECK (overlap IN ('skip', 'allow', 'buffer_one', 'cancel_other'));
-- With overlap allow: at most this many runs running at once (NULL: no limit).
ALTER TABLE tasks ADD COLUMN max_concurrency integer CHECK (max_concurrency BETWEEN 1 AND 100);

ALTER TABLE task_runs
    -- The run's input: the webhook body or publish payload; NULL: the task's.
    ADD COLUMN payload         jsonb,
    -- The failed or cancelled run this one retries.
    ADD COLUMN retry_of        uuid REFERENCES task_runs (id) ON DELETE SET NULL,
    -- While queued between attempts: when River runs the next one.
    ADD COLUMN next_attempt_at timestamptz;

-- The dead-letter view: an owner's failed runs, newest first.
CREATE INDEX task_runs_failed_idx ON task_runs (created_at DESC, id DESC) WHERE status = 'failed';
-- retry_of is a foreign key: deleting (pruning) a run looks up its retries.
CREATE INDEX task_runs_retry_of_idx ON task_runs (retry_of) WHERE retry_of IS NOT NULL;

-- Idempotency keys of triggers: one row per (task, key). A trigger claims
-- its key with INSERT … ON CONFLICT before it inserts the run, so
-- concurrent triggers with one key make one run whichever replica serves
-- them; a key older than 24 h is taken over by the next trigger.
CREATE TABLE task_run_keys (
    task_id    uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    key        text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    -- Deferred: the key is claimed before its run row exists.
    run_id     uuid NOT NULL REFERENCES task_runs (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, key)
);

CREATE INDEX task_run_keys_run_idx ON task_run_keys (run_id);

-- Every attempt of a run, as River made it.
CREATE TABLE task_run_attempts (
    run_id           uuid NOT NULL REFERENCES task_runs (id) ON DELETE CASCADE,
    attempt          integer NOT NULL,
    status           text NOT NULL
                     CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
    started_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    duration_ms      integer,
    http_status      integer,
    error            text,
    response_excerpt text,
    PRIMARY KEY (run_id, attempt)
);

-- +goose Down
DROP TABLE task_run_attempts;
DROP TABLE task_run_keys;
DROP INDEX task_runs_retry_of_idx;
DROP INDEX task_runs_failed_idx;
ALTER TABLE task_runs DROP COLUMN next_attempt_at, DROP COLUMN retry_of, DROP COLUMN payload;
DELETE FROM tasks WHERE schedule IS NULL;
ALTER TABLE tasks ALTER COLUMN schedule SET NOT NULL;
ALTER TABLE tasks DROP COLUMN max_concurrency;
UPDATE tasks SET overlap = 'skip' WHERE overlap NOT IN ('skip', 'allow');
ALTER TABLE tasks DROP CONSTRAINT tasks_overlap_check,
    ADD CONSTRAINT tasks_overlap_check CHECK (overlap IN ('skip', 'allow'));
