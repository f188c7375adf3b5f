-- +goose Up
CREATE TABLE tasks (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    schedule        text NOT NULL,
    timezone        text NOT NULL DEFAULT 'UTC',
    action          jsonb NOT NULL,
    active          boolean NOT NULL DEFAULT true,
    overlap         text NOT NULL DEFAULT 'skip' CHECK (overlap IN ('skip', 'allow')),
    max_attempts    integer NOT NULL DEFAULT 3 CHECK (max_attempts BETWEEN 1 AND 25),
    timeout_seconds integer NOT NULL DEFAULT 30 CHECK (timeout_seconds BETWEEN 1 AND 600),
    signing_secret  text NOT NULL,
    -- NULL while inactive; the claim loop owns it while active.
    next_run_at     timestamptz,
    last_run_at     timestamptz,
    run_count       bigint NOT NULL DEFAULT 0,
    -- Ticks that produced no run: missed while no claimer ran, or skipped
    -- because a run was still active (overlap skip).
    skipped_ticks   bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Serves the claim (active AND next_run_at <= now() ORDER BY next_run_at)
-- and the earliest-due lookup; inactive tasks are not in it.
CREATE INDEX tasks_due_idx ON tasks (next_run_at) WHERE active AND next_run_at IS NOT NULL;
-- Owner listing, newest first, keyset paginated.
CREATE INDEX tasks_owner_idx ON tasks (owner_id, created_at DESC, id DESC);

CREATE TABLE task_runs (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    task_id          uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    status           text NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    trigger          text NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    scheduled_for    timestamptz NOT NULL,
    -- Earlier ticks folded into this run because no claimer ran at the time.
    skipped_ticks    integer NOT NULL DEFAULT 0,
    attempt          integer NOT NULL DEFAULT 0,
    started_at       timestamptz,
    finished_at      timestamptz,
    duration_ms      integer,
    http_status      integer,
    error            text,
    response_excerpt text,
    created_at       timestamptz NOT NULL DEFAULT now()
);

-- One run per scheduled tick, whoever claims it.
CREATE UNIQUE INDEX task_runs_tick_key ON task_runs (task_id, scheduled_for) WHERE trigger = 'schedule';
-- Run history of a task, newest first, keyset paginated.
CREATE INDEX task_runs_task_idx ON task_runs (task_id, created_at DESC, id DESC);
-- The overlap check: is a run of this task queued or running?
CREATE INDEX task_runs_active_idx ON task_runs (task_id) WHERE status IN ('queued', 'running');
-- Retention pruning of finished runs.
CREATE INDEX task_runs_finished_idx ON task_runs (finished_at) WHERE finished_at IS NOT NULL;

-- +goose Down
DROP TABLE task_runs;
DROP TABLE tasks;
