package jobs

import (
	"context"
	_ "embed" // backlog.sql, fairfetch.sql
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/db"
)

// River's schema, as this service reaches it: every statement of ours on
// River's tables (river_job), the insert notification we send on River's
// behalf and the insert middleware that sets a job's state. River's own
// code sends its statements through riverdriver; these are the ones it
// has no API for. riverschema_test.go checks the columns, the job states
// and the indexes they rely on against River's migrations.

// riverVersion is the River release these statements were checked
// against. On an upgrade, riverschema_test.go fails until each statement
// below has been checked against the new release's schema (its
// migrations and its riverdriver queries) and this is updated.
const riverVersion = "v0.51.2"

// runJobKind is River's kind of task-run jobs (RunArgs.Kind).
const runJobKind = "task_run"

// backlogSQL is the one query behind the backlog metrics, the cluster
// status's backlog section and the chart's KEDA trigger (backlog.go).
//
//go:embed backlog.sql
var backlogSQL string

// fairFetchSQL is the fetch River's producers take jobs with (FairFetch):
// River's JobGetAvailable, sharing the jobs between projects.
//
//go:embed fairfetch.sql
var fairFetchSQL string

// runJobs is the run jobs of one priority in state, as
// river_job_prioritized_fetching_index (state, queue, priority,
// scheduled_at) reads them: the default queue holds only run jobs, of
// priorities 1 to MaxPriority (runInsertOpts).
func runJobs(state string, priority int) string {
	return `river_job WHERE state = '` + state + `' AND queue = 'default' AND priority = ` + strconv.Itoa(priority)
}

// runJobsNextSQL is the earliest future scheduled_at of a run job that
// waits for it, whether River holds it available, scheduled or retryable
// (NULL: none).
//
// why: one index-only min per state on river_job_prioritized_fetching_index.
// An IN over the states, or a kind filter (the planner then takes
// river_job_kind), would read every matching job.
var runJobsNextSQL = `LEAST(` + jobMin("available") + `, ` + jobMin("scheduled") + `, ` + jobMin("retryable") + `)`

// runJobsDueSQL is whether a run job's time has come: fetchable
// (available), or waiting for River's scheduler, which runs only in a
// running client (scheduled, retryable).
var runJobsDueSQL = jobDue("available") + ` OR ` + jobDue("scheduled") + ` OR ` + jobDue("retryable")

// why: one index-only lookup per priority; an IN over the priorities
// would read every matching job for the min.
func jobMin(state string) string {
	mins := make([]string, MaxPriority)
	for p := range MaxPriority {
		mins[p] = `(SELECT min(scheduled_at) FROM ` + runJobs(state, p+1) + ` AND scheduled_at > now())`
	}
	return `LEAST(` + strings.Join(mins, ", ") + `)`
}

func jobDue(state string) string {
	exists := make([]string, MaxPriority)
	for p := range MaxPriority {
		exists[p] = `EXISTS (SELECT 1 FROM ` + runJobs(state, p+1) + ` AND scheduled_at <= now())`
	}
	return `(` + strings.Join(exists, " OR ") + `)`
}

// lastRunJobSQL is the state of the latest job of the run whose id is the
// SQL expression runID, found through River's GIN index on args (no row:
// River's cleaner deleted it).
func lastRunJobSQL(runID string) string {
	return `SELECT state FROM river_job j
				WHERE j.args @> jsonb_build_object('run_id', ` + runID + `::text) AND j.kind = 'task_run'
				ORDER BY j.id DESC LIMIT 1`
}

// cancelJobs cancels the run's unfinished River jobs (found through River's
// GIN index on args) through River's JobCancelTx: a job still queued is
// finalised, a running one is told through River's control notification.
func cancelJobs(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], runID string) error {
	rows, err := tx.Query(ctx, `
		SELECT id FROM river_job
		WHERE args @> jsonb_build_object('run_id', $1::text) AND kind = 'task_run' AND finalized_at IS NULL`, runID)
	if err != nil {
		return fmt.Errorf("cancel run: find job: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("cancel run: find job: %w", err)
	}
	for _, id := range ids {
		if _, err := client.JobCancelTx(ctx, tx, id); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("cancel run: cancel job %d: %w", id, err)
		}
	}
	return nil
}

// deleteAheadJobs deletes, in the caller's transaction, the River jobs of
// the task's runs claimed ahead of a tick that is still in the future, and
// returns those runs' ids. A job a producer already fetched (the tick
// came) is left alone: the delete waits for the fetch's row lock and the
// rechecked state no longer matches.
func deleteAheadJobs(ctx context.Context, tx pgx.Tx, taskID string) ([]string, error) {
	rows, err := tx.Query(ctx, `
		DELETE FROM river_job j USING task_runs r
		WHERE r.task_id = $1 AND r.trigger = 'schedule' AND r.status = 'queued' AND r.attempt = 0
		  AND r.scheduled_for > clock_timestamp()
		  AND j.kind = 'task_run' AND j.args @> jsonb_build_object('run_id', r.id::text)
		  AND j.state = 'available' AND j.scheduled_at > clock_timestamp()
		RETURNING r.id::text`, taskID)
	if err != nil {
		return nil, fmt.Errorf("delete jobs claimed ahead: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("delete jobs claimed ahead: %w", err)
	}
	return ids, nil
}

// rescueJobs makes the running jobs last attempted by deadNodes available
// again at once, and returns them.
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
func rescueJobs(ctx context.Context, q db.DB, deadNodes []string, by string) ([]RescuedJob, error) {
	rows, err := q.Query(ctx, `
		UPDATE river_job j
		SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'available' END::river_job_state,
			scheduled_at = now(),
			finalized_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
			errors = array_append(j.errors, jsonb_build_object(
				'at', now(), 'attempt', j.attempt, 'trace', '',
				'error', format('node %s stopped heartbeating while running this job; rescued by node %s', j.attempted_by[array_upper(j.attempted_by, 1)], $2::text)))
		WHERE j.state = 'running' AND j.attempted_by[array_upper(j.attempted_by, 1)] = ANY($1::text[])
		RETURNING j.id, j.kind, j.args, j.state::text, j.attempted_by[array_upper(j.attempted_by, 1)], j.queue`, deadNodes, by)
	if err != nil {
		return nil, fmt.Errorf("rescue jobs of dead nodes: %w", err)
	}
	rescued, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RescuedJob, error) {
		var j RescuedJob
		return j, r.Scan(&j.ID, &j.Kind, &j.Args, &j.State, &j.DeadNode, &j.Queue)
	})
	if err != nil {
		return nil, fmt.Errorf("rescue jobs of dead nodes: %w", err)
	}
	return rescued, nil
}

// queueCounts counts the jobs by state, for the cluster status.
func queueCounts(ctx context.Context, q db.DB) (cluster.QueueCounts, error) {
	var c cluster.QueueCounts
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

// RunJobStates counts the River jobs of task runs by state, every state
// (completed and cancelled ones too, until River's cleaner deletes them):
// what a checker compares the runs with.
func RunJobStates(ctx context.Context, q db.DB) (map[string]int, error) {
	rows, err := q.Query(ctx, `SELECT state::text, count(*) FROM river_job WHERE kind = $1 GROUP BY 1`, runJobKind)
	if err != nil {
		return nil, fmt.Errorf("count run jobs: %w", err)
	}
	out := map[string]int{}
	var state string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		out[state] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count run jobs: %w", err)
	}
	return out, nil
}

// jobsRunningByNode counts running jobs by the node that fetched them last
// (River's attempted_by holds the client id, which is the node id).
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

// LegacyMaintenanceJobsCTE is a data-modifying CTE that deletes River's
// periodic maintenance jobs (kind maintenance) a replica of an older
// version inserted, which nothing works since maintenance runs on
// maintenance_schedule; a running one is left to finish. The maintenance
// loop's registration runs it in its own statement (one round trip).
const LegacyMaintenanceJobsCTE = `legacy_maintenance_jobs AS (
			DELETE FROM river_job WHERE kind = 'maintenance' AND state <> 'running'
		)`

// insertChannelSQL is the SQL of River's insert notification channel for
// the River schema given by the SQL expression schema (”: the current
// schema): <schema>.river_insert, as River names it when it notifies
// (client.go maybeNotifyInsertForQueues, riverdriver NotifyMany) and when
// its listener LISTENs (riverpgxv5 Listener). Every notification we send on
// River's behalf, and the bus's LISTEN for it, name it through this.
func insertChannelSQL(schema string) string {
	return `coalesce(NULLIF(` + schema + `, ''), current_schema(), '') || '.river_insert'`
}

// InsertChannel is River's insert notification channel on q's database
// with River's default schema.
func InsertChannel(ctx context.Context, q db.DB) (string, error) {
	var channel string
	if err := q.QueryRow(ctx, `SELECT `+insertChannelSQL("''")).Scan(&channel); err != nil {
		return "", fmt.Errorf("river insert channel: %w", err)
	}
	return channel, nil
}

// notifyInsertAt sends River's insert notification for the run queue once
// the database's clock reached at: River's producers fetch with the
// database's now(), so a notification sent by a clock running ahead would
// find the jobs not yet due and leave them to the next poll. (The wait is
// at most a second, on one connection.) The channel and payload are
// River's own: <schema>.river_insert, {"queue": name}.
func notifyInsertAt(ctx context.Context, q db.DB, schema string, at time.Time) error {
	payload, err := json.Marshal(map[string]string{"queue": river.QueueDefault})
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `
		SELECT pg_sleep(LEAST(1, GREATEST(0, EXTRACT(EPOCH FROM $1::timestamptz - clock_timestamp())))),
		       pg_notify(`+insertChannelSQL("$2")+`, $3)`,
		at, schema, string(payload))
	return err
}

// notifyInsertQueues sends River's insert notification (at commit) for
// each of queues, in the default schema, as River's own insert does.
func notifyInsertQueues(ctx context.Context, tx pgx.Tx, queues []string) error {
	_, err := tx.Exec(ctx, `
		SELECT pg_notify(`+insertChannelSQL("''")+`, json_build_object('queue', q)::text)
		FROM unnest($1::text[]) AS q`, queues)
	return err
}

// InsertAvailable is the River insert middleware that inserts the
// task-run jobs of a marked insert (markInsertAvailable) available, with
// scheduled_at their time, instead of scheduled: River's producers fetch
// available jobs whose scheduled_at has passed, so they take them at that
// time, where River's scheduler would make a scheduled job available on
// its 5 s tick. Claiming ahead and delayed runs need it; inserts not so
// marked pass unchanged. Every River client that inserts runs has it
// (workers.RiverConfig, workers.NewRiver).
type InsertAvailable struct {
	river.MiddlewareDefaults
}

// availableInsert is one insert marked for InsertAvailable; kept reports
// afterwards whether the middleware ran (a client without it inserts the
// jobs scheduled).
type availableInsert struct{ kept bool }

type availableKey struct{}

// markInsertAvailable marks the insert made with the returned context for
// InsertAvailable. River's insert API carries nothing else per call to a
// middleware without storing it in the job (InsertOpts' fields are
// columns), hence the context.
func markInsertAvailable(ctx context.Context) (context.Context, *availableInsert) {
	m := &availableInsert{}
	return context.WithValue(ctx, availableKey{}, m), m
}

// InsertMany keeps the marked insert's scheduled task-run jobs available.
func (InsertAvailable) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams,
	doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	if m, ok := ctx.Value(availableKey{}).(*availableInsert); ok {
		m.kept = true
		for _, p := range params {
			if p.Kind == runJobKind && p.State == rivertype.JobStateScheduled {
				p.State = rivertype.JobStateAvailable
			}
		}
	}
	return doInner(ctx)
}
