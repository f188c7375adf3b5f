package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// A task created through a web-only replica is claimed at its first tick
// by a worker-only replica whose idle poll is an hour: the task's insert
// rings every claim loop (migrations/00013, heard through the bus's
// notices). Without the ring the worker would look again in an hour.
func TestTaskCreatedElsewhereWakesTheClaimLoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	webCfg := testConfig(t, dbURL)
	webCfg.Roles = []string{config.RoleWeb}
	web := startServer(t, webCfg)
	token, _ := registerUser(t, web, "wake@example.com")
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	// A due task the test holds locked when the worker starts: the worker's
	// claim loop skips it, counts it due (its backlog gauge reads 1) and
	// looks again every 20 ms. Deleted, the next look counts nothing due
	// (the gauge reads 0) and the loop goes to sleep for its idle poll, an
	// hour: after that only a notice wakes it.
	held := createTask(t, web.URL, token, map[string]any{
		"name": "held", "schedule": "@every 1h", "action": map[string]any{"type": "publish", "event": "tick"},
	})
	if _, err := conn.Exec(ctx, `UPDATE tasks SET next_run_at = now() WHERE id = $1`, held); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT id FROM tasks WHERE id = $1 FOR UPDATE`, held); err != nil {
		t.Fatal(err)
	}
	workerCfg := testConfig(t, dbURL)
	workerCfg.Roles, workerCfg.ClaimIdlePoll = []string{config.RoleWorker}, time.Hour
	worker := startServer(t, workerCfg)
	testwait.For(t, 10*time.Second, "the worker-only replica to LISTEN for task changes", worker.bus.Listening)
	due := func() float64 { return metric(t, worker, "switchboard_tasks_due", "") }
	testwait.For(t, 15*time.Second, "the worker to see the held task due", func() bool { return due() == 1 })
	if _, err := tx.Exec(ctx, `DELETE FROM tasks WHERE id = $1`, held); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "the worker to see nothing due", func() bool { return due() == 0 })

	status, task := call(t, http.MethodPost, web.URL+"/v1/tasks", map[string]any{
		"name": "first tick elsewhere", "schedule": "@every 1s", "action": map[string]any{"type": "publish", "event": "tick"},
	}, token)
	if status != http.StatusCreated {
		t.Fatalf("create task: %d %v", status, task)
	}
	firstTick, err := time.Parse(time.RFC3339Nano, task["next_run_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	id := task["id"].(string)
	testwait.For(t, 15*time.Second, "the worker to claim the new task's first tick", func() bool { return len(scheduledRuns(t, conn, id)) > 0 })
	if got := scheduledRuns(t, conn, id)[0]; !got.Equal(firstTick) {
		t.Fatalf("first run is for the tick at %s, want the first tick %s", got, firstTick)
	}
}

// scheduledRuns is the ticks a task's scheduled runs are for, oldest first.
func scheduledRuns(t *testing.T, conn *pgx.Conn, taskID string) []time.Time {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
		SELECT scheduled_for FROM task_runs WHERE task_id = $1 AND trigger = 'schedule' ORDER BY scheduled_for`, taskID)
	if err != nil {
		t.Fatal(err)
	}
	ticks, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	return ticks
}
