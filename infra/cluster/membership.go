package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// Node is a registered process as cluster_nodes holds it.
type Node struct {
	ID           string
	Name         string
	Addr         string
	Roles        []string
	Version      string
	StartedAt    time.Time
	HeartbeatAge time.Duration
	Draining     bool
}

// nodeUpsert registers n or refreshes its heartbeat. An upsert rather than an
// update: a node whose row was reaped (a long pause, a database outage)
// registers itself again on its next beat.
func nodeUpsert(ctx context.Context, q db.DB, n Node) error {
	_, err := q.Exec(ctx, `
		INSERT INTO cluster_nodes (id, name, addr, roles, version, started_at, heartbeat_at, draining)
		VALUES ($1, $2, $3, $4, $5, $6, now(), $7)
		ON CONFLICT (id) DO UPDATE
		SET addr = EXCLUDED.addr, heartbeat_at = now(), draining = EXCLUDED.draining`,
		n.ID, n.Name, n.Addr, n.Roles, n.Version, n.StartedAt, n.Draining)
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

func nodeDelete(ctx context.Context, q db.DB, id string) error {
	if _, err := q.Exec(ctx, `DELETE FROM cluster_nodes WHERE id = $1`, id); err != nil {
		return fmt.Errorf("deregister: %w", err)
	}
	return nil
}

func nodeSetDraining(ctx context.Context, q db.DB, id string) error {
	if _, err := q.Exec(ctx, `UPDATE cluster_nodes SET draining = true WHERE id = $1`, id); err != nil {
		return fmt.Errorf("record draining: %w", err)
	}
	return nil
}

const nodeColumns = `id::text, name, addr, roles, version, started_at,
	(extract(epoch FROM clock_timestamp() - heartbeat_at) * 1000)::bigint, draining`

func scanNode(row pgx.Row) (Node, error) {
	var n Node
	var ageMS int64
	err := row.Scan(&n.ID, &n.Name, &n.Addr, &n.Roles, &n.Version, &n.StartedAt, &ageMS, &n.Draining)
	n.HeartbeatAge = time.Duration(max(ageMS, 0)) * time.Millisecond
	return n, err
}

// nodeList returns every registered node, live or not yet reaped, oldest first.
func nodeList(ctx context.Context, q db.DB) ([]Node, error) {
	rows, err := q.Query(ctx, `SELECT `+nodeColumns+` FROM cluster_nodes ORDER BY started_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Node, error) { return scanNode(r) })
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return nodes, nil
}

func nodeByID(ctx context.Context, q db.DB, id string) (Node, error) {
	n, err := scanNode(q.QueryRow(ctx, `SELECT `+nodeColumns+` FROM cluster_nodes WHERE id::text = $1`, id))
	return n, db.Translate(err)
}

// RescuedJob is a River job that was running on a node that stopped
// heartbeating and was made available again (or discarded, its attempts
// spent). State is the job's new state.
type RescuedJob struct {
	ID       int64
	Kind     string
	Args     []byte
	State    string
	DeadNode string
}

// jobsRescue makes the running jobs of nodes silent for longer than expire
// available again at once, and returns them.
//
// Why a statement on River's table: River's own rescuer waits for
// RescueStuckJobsAfter and its JobRetry API leaves running jobs alone, while
// an `overlap: skip` task gets no tick until its run ends. The job's last
// attempted_by is the River client id, which is the node id. Like River's
// rescuer, it appends an AttemptError and discards a job whose attempts are
// spent. Like JobRetry, it makes the job available with scheduled_at now,
// rather than retryable: retryable jobs wait for River's scheduler, which
// runs on the leader, which may be the dead node. Concurrent callers are
// safe: row locks serialise them and the second finds the job no longer
// running.
func jobsRescue(ctx context.Context, q db.DB, expire time.Duration, by string) ([]RescuedJob, error) {
	rows, err := q.Query(ctx, `
		WITH dead AS (
			SELECT id::text AS id FROM cluster_nodes
			WHERE heartbeat_at < clock_timestamp() - make_interval(secs => $1)
		)
		UPDATE river_job j
		SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'available' END::river_job_state,
			scheduled_at = now(),
			finalized_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
			errors = array_append(j.errors, jsonb_build_object(
				'at', now(), 'attempt', j.attempt, 'trace', '',
				'error', format('node %s stopped heartbeating while running this job; rescued by node %s', j.attempted_by[array_upper(j.attempted_by, 1)], $2::text)))
		FROM dead
		WHERE j.state = 'running' AND j.attempted_by[array_upper(j.attempted_by, 1)] = dead.id
		RETURNING j.id, j.kind, j.args, j.state::text, dead.id`, expire.Seconds(), by)
	if err != nil {
		return nil, fmt.Errorf("rescue jobs of dead nodes: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RescuedJob, error) {
		var j RescuedJob
		return j, r.Scan(&j.ID, &j.Kind, &j.Args, &j.State, &j.DeadNode)
	})
	if err != nil {
		return nil, fmt.Errorf("rescue jobs of dead nodes: %w", err)
	}
	return jobs, nil
}

// nodesReap deletes nodes silent for longer than silentFor.
func nodesReap(ctx context.Context, q db.DB, silentFor time.Duration) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM cluster_nodes WHERE heartbeat_at < clock_timestamp() - make_interval(secs => $1)`, silentFor.Seconds())
	if err != nil {
		return 0, fmt.Errorf("reap dead nodes: %w", err)
	}
	return tag.RowsAffected(), nil
}

// QueueCounts are River jobs by state.
type QueueCounts struct {
	Available int64 `json:"available"`
	Running   int64 `json:"running"`
	Scheduled int64 `json:"scheduled"`
	Retryable int64 `json:"retryable"`
	Discarded int64 `json:"discarded"`
}

func queueCounts(ctx context.Context, q db.DB) (QueueCounts, error) {
	var c QueueCounts
	err := q.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE state = 'available'),
			count(*) FILTER (WHERE state = 'running'),
			count(*) FILTER (WHERE state = 'scheduled'),
			count(*) FILTER (WHERE state = 'retryable'),
			count(*) FILTER (WHERE state = 'discarded')
		FROM river_job
		WHERE state IN ('available', 'running', 'scheduled', 'retryable', 'discarded')`).
		Scan(&c.Available, &c.Running, &c.Scheduled, &c.Retryable, &c.Discarded)
	if err != nil {
		return c, fmt.Errorf("count jobs: %w", err)
	}
	return c, nil
}

// jobsRunningByNode counts running jobs by the node that fetched them last.
func jobsRunningByNode(ctx context.Context, q db.DB) (map[string]int, error) {
	rows, err := q.Query(ctx, `
		SELECT attempted_by[array_upper(attempted_by, 1)], count(*)
		FROM river_job WHERE state = 'running' GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("count running jobs: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var node *string
		var n int
		if err := rows.Scan(&node, &n); err != nil {
			return nil, fmt.Errorf("count running jobs: %w", err)
		}
		if node != nil {
			out[*node] = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count running jobs: %w", err)
	}
	return out, nil
}

// SchedulerStatus is the backlog of due tasks the claim loops have not
// claimed yet.
type SchedulerStatus struct {
	DueTasks       int64 `json:"due_tasks" doc:"active tasks whose next run is due"`
	OldestDueAgeMS int64 `json:"oldest_due_age_ms" doc:"how long the oldest due task has waited"`
}

func schedulerBacklog(ctx context.Context, q db.DB) (SchedulerStatus, error) {
	var s SchedulerStatus
	// Same figures as the claim loop's jobs.DueStats (served by tasks_due_idx).
	err := q.QueryRow(ctx, `
		SELECT count(*), coalesce((extract(epoch FROM now() - min(next_run_at)) * 1000)::bigint, 0)
		FROM tasks WHERE active AND next_run_at <= now()`).Scan(&s.DueTasks, &s.OldestDueAgeMS)
	if err != nil {
		return s, fmt.Errorf("count due tasks: %w", err)
	}
	return s, nil
}
