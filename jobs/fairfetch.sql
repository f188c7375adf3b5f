-- The fair fetch: River's JobGetAvailable (riverpgxv5, river_job.sql) with
-- the available jobs taken in turns across projects instead of first in,
-- first out. A job's turn is how many of its project's jobs this replica
-- would be running once it took it: the running ones ($6, $7) plus the
-- job's rank among its project's fetchable jobs (priority, scheduled_at,
-- id, River's order). Jobs are taken by turn, then in River's order. A job
-- whose turn is within its project's share ($8) may take any free slot; a
-- job beyond it only one of the first $9 (the free slots less the
-- reserve) that jobs within their share left. The claim is River's: the same row lock
-- (FOR UPDATE SKIP LOCKED, the state rechecked on the locked row) and the
-- same update of state, attempt, attempted_at and attempted_by.
--
-- $1 queue, $2 now (NULL: the database's), $3 max to lock, $4 the client
-- id, $5 attempted_by's bound, $6 and $7 this replica's running jobs per
-- project, $8 the share, $9 max to lock less the reserve.
--
-- why: each step reads river_job_project_fetching_index (queue, project,
-- priority, scheduled_at, id WHERE available): the recursive CTE skips
-- from one project to the next (one probe per project with available
-- jobs), each project's first jobs are read in River's order, so a fetch
-- reads at most (projects × max to lock) index entries, never the whole
-- backlog.
WITH RECURSIVE projects AS (
    (SELECT coalesce(metadata->>'project', '') AS project
     FROM river_job
     WHERE state = 'available' AND queue = $1::text
     ORDER BY coalesce(metadata->>'project', '')
     LIMIT 1)
    UNION ALL
    SELECT (SELECT coalesce(j.metadata->>'project', '')
            FROM river_job j
            WHERE j.state = 'available' AND j.queue = $1::text
              AND coalesce(j.metadata->>'project', '') > p.project
            ORDER BY coalesce(j.metadata->>'project', '')
            LIMIT 1)
    FROM projects p
    WHERE p.project IS NOT NULL
),
candidates AS (
    SELECT c.id, c.priority, c.scheduled_at,
        coalesce(r.running, 0) + row_number() OVER (PARTITION BY p.project ORDER BY c.priority, c.scheduled_at, c.id) AS turn
    FROM projects p
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.scheduled_at
        FROM river_job j
        WHERE j.state = 'available' AND j.queue = $1::text
          AND coalesce(j.metadata->>'project', '') = p.project
          AND j.scheduled_at <= coalesce($2::timestamptz, now())
        ORDER BY j.priority, j.scheduled_at, j.id
        LIMIT $3::integer
    ) c
    LEFT JOIN unnest($6::text[], $7::integer[]) AS r(project, running) ON r.project = p.project
    WHERE p.project IS NOT NULL
),
chosen AS (
    SELECT * FROM candidates WHERE turn <= $8::integer
    UNION ALL
    (SELECT * FROM candidates WHERE turn > $8::integer
     ORDER BY turn, priority, scheduled_at, id
     LIMIT greatest(0, $9::integer - (SELECT count(*) FROM candidates WHERE turn <= $8::integer)))
),
locked_jobs AS (
    SELECT j.id
    FROM river_job j
    JOIN chosen c ON c.id = j.id
    WHERE j.state = 'available'
    ORDER BY c.turn, c.priority, c.scheduled_at, c.id
    LIMIT $3::integer
    FOR UPDATE OF j
    SKIP LOCKED
),
fetched AS (
    UPDATE river_job
    SET state = 'running',
        attempt = river_job.attempt + 1,
        attempted_at = coalesce($2::timestamptz, now()),
        attempted_by = array_append(
            CASE WHEN array_length(river_job.attempted_by, 1) >= $5::integer
            THEN river_job.attempted_by[array_length(river_job.attempted_by, 1) + 2 - $5::integer:]
            ELSE river_job.attempted_by
            END,
            $4::text
        )
    FROM locked_jobs
    WHERE river_job.id = locked_jobs.id
    RETURNING
        river_job.id, river_job.args, river_job.attempt, river_job.attempted_at, river_job.attempted_by,
        river_job.created_at, river_job.errors, river_job.finalized_at, river_job.kind, river_job.max_attempts,
        river_job.metadata, river_job.priority, river_job.queue, river_job.state::text AS state, river_job.scheduled_at,
        river_job.tags, river_job.unique_key, river_job.unique_states
)
-- One row per job taken, each with how many jobs were fetchable (one row
-- with no job when none was taken).
SELECT f.*, c.fetchable
FROM (SELECT count(*) AS fetchable FROM candidates) c
LEFT JOIN fetched f ON true
