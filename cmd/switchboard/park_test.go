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

// parkingWorker starts a replica with roles on dbURL whose River parks
// after a second idle, with the claim loop's idle poll given.
func parkingWorker(t *testing.T, dbURL string, idlePoll time.Duration, roles ...string) *testServer {
	t.Helper()
	cfg := testConfig(t, dbURL)
	cfg.Roles, cfg.RiverParkAfter, cfg.ClaimIdlePoll = roles, time.Second, idlePoll
	w := startServer(t, cfg)
	testwait.For(t, 10*time.Second, "the worker to LISTEN", w.bus.Listening)
	testwait.For(t, 20*time.Second, "the idle worker's River to park", w.jobs.queue.River().Parked)
	return w
}

// runStatus reads a run's status.
func runStatus(t *testing.T, conn *pgx.Conn, id string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), `SELECT status FROM task_runs WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// A parked River starts again for a run triggered on another replica: the
// run's insert notification (River's, heard on the bus's LISTEN) wakes it.
// The claim loop's idle poll is an hour, so nothing else could. It parks
// again once idle, and a replica stopped while parked stops cleanly.
func TestParkedRiverWakesForARunInsertedElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	webCfg := testConfig(t, dbURL)
	webCfg.Roles = []string{config.RoleWeb}
	web := startServer(t, webCfg)
	token, _ := registerUser(t, web, "park@example.com")
	taskID := createTask(t, web.URL, token, map[string]any{
		"name": "parked", "schedule": "@every 1h", "action": map[string]any{"type": "publish", "event": "tick"},
	})
	worker := parkingWorker(t, dbURL, time.Hour, config.RoleWorker)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	for round := range 2 {
		parks := worker.jobs.queue.River().Parks()
		status, run := call(t, http.MethodPost, web.URL+"/v1/tasks/"+taskID+"/runs", nil, token)
		if status != http.StatusAccepted && status != http.StatusCreated {
			t.Fatalf("round %d: trigger: %d %v", round, status, run)
		}
		id := run["id"].(string)
		testwait.For(t, 20*time.Second, "the run to succeed on the woken worker", func() bool { return runStatus(t, conn, id) == "succeeded" })
		var wake time.Duration
		if err := conn.QueryRow(ctx, `SELECT started_at - created_at FROM task_runs WHERE id = $1`, id).Scan(&wake); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: the run started %s after it was created, River parked", round, wake)
		testwait.For(t, 20*time.Second, "River to park again", func() bool { return worker.jobs.queue.River().Parked() && worker.jobs.queue.River().Parks() > parks })
	}
}

// A job made fetchable without a notification (River UI's retry does
// that) is found by the claim loop's next look, which wakes River.
func TestParkedRiverWakesForAJobNobodyAnnounced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	worker := parkingWorker(t, dbURL, time.Second, config.RoleWeb, config.RoleWorker)
	token, _ := registerUser(t, worker, "silent@example.com")
	taskID := createTask(t, worker.URL, token, map[string]any{
		"name": "silent", "schedule": "@every 1h", "action": map[string]any{"type": "publish", "event": "tick"},
	})
	status, run := call(t, http.MethodPost, worker.URL+"/v1/tasks/"+taskID+"/runs", nil, token)
	if status != http.StatusAccepted && status != http.StatusCreated {
		t.Fatalf("trigger: %d %v", status, run)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	id := run["id"].(string)
	testwait.For(t, 20*time.Second, "the run to succeed", func() bool { return runStatus(t, conn, id) == "succeeded" })

	// The run's finished job made available again by a statement alone:
	// no NOTIFY. Worked again, it finds its run finished and completes.
	// Then the same as a retry whose time passed while every client was
	// parked: River's scheduler, which makes it available, runs only in a
	// running client.
	for _, state := range []string{"available", "retryable"} {
		testwait.For(t, 20*time.Second, "River to park", worker.jobs.queue.River().Parked)
		var jobID int64
		err = conn.QueryRow(ctx, `
			UPDATE river_job SET state = $2, finalized_at = NULL, scheduled_at = now() - interval '1 second'
			WHERE args->>'run_id' = $1 RETURNING id`, id, state).Scan(&jobID)
		if err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 20*time.Second, "the silent "+state+" job to be worked", func() bool {
			var got string
			if err := conn.QueryRow(ctx, `SELECT state FROM river_job WHERE id = $1`, jobID).Scan(&got); err != nil {
				t.Fatal(err)
			}
			return got == "completed"
		})
	}
}
