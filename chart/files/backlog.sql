-- The backlog a worker-pool scaler reads: one row, every figure from one
-- snapshot. Kept byte-for-byte in chart/files/backlog.sql, where the chart's
-- KEDA trigger reads its `demand` column (chart tests compare the two files).
--
-- Why these states: only unfinished jobs are counted, so the cost follows the
-- backlog (index scans of river_job_prioritized_fetching_index by state and of
-- tasks_due_idx), never the job history. Scheduled and retryable jobs whose
-- time has come are ready: River's scheduler, which runs in a worker, makes
-- them available, so with no worker they wait like available ones. An
-- available job may be due a moment later (a tick claimed ahead): it counts
-- as demand, not yet towards the oldest age.
--
-- demand is what the workers have to do now: ready jobs + running jobs + due
-- ticks. Running jobs count so that a busy pool is not scaled to zero while it
-- works through a burst.
WITH jobs AS (
    SELECT count(*) FILTER (WHERE state = 'available') AS available,
           count(*) FILTER (WHERE state IN ('scheduled', 'retryable')) AS scheduled,
           count(*) FILTER (WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= now()) AS scheduled_due,
           count(*) FILTER (WHERE state = 'running') AS running,
           min(scheduled_at) FILTER (WHERE state IN ('available', 'scheduled', 'retryable')
               AND scheduled_at <= now()) AS oldest_ready_at
    FROM river_job
    WHERE state IN ('available', 'scheduled', 'retryable', 'running')
), ticks AS (
    SELECT count(*) AS due, min(next_run_at) AS oldest_due_at
    FROM tasks
    WHERE active AND next_run_at IS NOT NULL AND next_run_at <= now()
)
SELECT jobs.available + jobs.scheduled_due + jobs.running + ticks.due AS demand,
       jobs.available,
       jobs.scheduled,
       jobs.scheduled_due,
       jobs.running,
       coalesce(EXTRACT(EPOCH FROM now() - jobs.oldest_ready_at), 0)::float8 AS oldest_available_age_seconds,
       ticks.due AS due_tasks,
       coalesce(EXTRACT(EPOCH FROM now() - ticks.oldest_due_at), 0)::float8 AS oldest_due_age_seconds,
       pg_notification_queue_usage() AS notification_queue_usage
FROM jobs, ticks
