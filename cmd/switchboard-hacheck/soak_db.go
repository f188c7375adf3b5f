package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// soakDB opens the soak's own connections to PostgreSQL, directly (not
// through a replica's cut proxy), named hacheck-soak so no fault
// terminates them.
func soakDB(ctx context.Context, pgURL string) (*pgxpool.Pool, error) {
	u, err := url.Parse(pgURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("application_name", "hacheck-soak")
	q.Set("pool_max_conns", "4")
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	return pool, nil
}

// readRuns reads every run of the tasks.
func readRuns(ctx context.Context, db *pgxpool.Pool, tasks []string) ([]dbRun, error) {
	rows, err := db.Query(ctx, `
		SELECT id::text, task_id::text, status, trigger, scheduled_for, created_at, finished_at,
			attempt, skipped_ticks, http_status, response_excerpt, error
		FROM task_runs WHERE task_id = ANY($1::uuid[])`, tasks)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (dbRun, error) {
		var r dbRun
		return r, row.Scan(&r.ID, &r.TaskID, &r.Status, &r.Trigger, &r.ScheduledFor, &r.CreatedAt, &r.FinishedAt,
			&r.Attempt, &r.SkippedTicks, &r.HTTPStatus, &r.Excerpt, &r.Error)
	})
}

// readAttempts reads every attempt record of the tasks' runs.
func readAttempts(ctx context.Context, db *pgxpool.Pool, tasks []string) ([]dbAttempt, error) {
	rows, err := db.Query(ctx, `
		SELECT a.run_id::text, a.attempt, a.status, a.started_at, a.finished_at, a.http_status, a.response_excerpt
		FROM task_run_attempts a JOIN task_runs r ON r.id = a.run_id
		WHERE r.task_id = ANY($1::uuid[])`, tasks)
	if err != nil {
		return nil, fmt.Errorf("read attempts: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (dbAttempt, error) {
		var a dbAttempt
		return a, row.Scan(&a.RunID, &a.Attempt, &a.Status, &a.StartedAt, &a.FinishedAt, &a.HTTPStatus, &a.Excerpt)
	})
}

// readKeys reads the idempotency keys of the tasks' triggers.
func readKeys(ctx context.Context, db *pgxpool.Pool, tasks []string) ([]dbKey, error) {
	rows, err := db.Query(ctx, `SELECT task_id::text, key, run_id::text FROM task_run_keys WHERE task_id = ANY($1::uuid[])`, tasks)
	if err != nil {
		return nil, fmt.Errorf("read idempotency keys: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (dbKey, error) {
		var k dbKey
		return k, row.Scan(&k.TaskID, &k.Key, &k.RunID)
	})
}

// unfinished counts the runs of the tasks still queued or running.
func unfinished(ctx context.Context, db *pgxpool.Pool, tasks []string) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM task_runs WHERE task_id = ANY($1::uuid[]) AND status IN ('queued', 'running')`, tasks).Scan(&n)
	return n, err
}

// dbNow is the database's clock, which the runs' times are on.
func dbNow(ctx context.Context, db *pgxpool.Pool) (time.Time, error) {
	var t time.Time
	err := db.QueryRow(ctx, `SELECT now()`).Scan(&t)
	return t, err
}
