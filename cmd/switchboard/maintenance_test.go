package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/workers"
)

// TestMaintenanceLoopWired: a worker replica registers every task
// workers.Maintenance declares and runs one whose period is due (claimed,
// moved a period on, counted), with no River periodic job.
func TestMaintenanceLoopWired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Due before the replica starts: its first claim takes it.
	if _, err := conn.Exec(ctx, `INSERT INTO maintenance_schedule VALUES ('reap_ws_tickets', now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, testConfig(t, dbURL))
	testwait.For(t, 15*time.Second, "reap_ws_tickets to run", func() bool {
		return metric(t, srv, "switchboard_maintenance_runs_total", `result="succeeded",task="reap_ws_tickets"`) == 1
	})
	want := len(workers.Maintenance(srv.workerOptions()))
	var rows, due, riverJobs int
	err = conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE next_at <= now()),
		(SELECT count(*) FROM river_job WHERE kind = 'maintenance') FROM maintenance_schedule`).Scan(&rows, &due, &riverJobs)
	if err != nil || rows != want || due != 0 || riverJobs != 0 {
		t.Fatalf("%d rows (want %d), %d due, %d River maintenance jobs (%v)", rows, want, due, riverJobs, err)
	}
}
