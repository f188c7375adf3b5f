-- +goose Up
-- The fair fetch (jobs/fairfetch.sql) reads River's available jobs by
-- project: one probe per project with available jobs, then each project's
-- first jobs in River's order (priority, scheduled_at, id). The project is
-- in a run job's metadata; jobs queued before it was (and any other kind)
-- share the empty project.
CREATE INDEX river_job_project_fetching_index ON river_job
    (queue, (coalesce(metadata ->> 'project', '')), priority, scheduled_at, id)
    WHERE state = 'available';

-- +goose Down
DROP INDEX river_job_project_fetching_index;
