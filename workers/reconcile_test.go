package workers

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/jobs"
)

func TestReconcileRunsTaskAnnouncesRescuedRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{})
	task := b.task(t, webhook("https://example.com/hook"))
	var runID string
	// A run whose job is gone: nothing will ever finish it but the reconciler.
	err := b.pool.QueryRow(ctx, `
		INSERT INTO task_runs (task_id, trigger, scheduled_for, status, created_at)
		VALUES ($1, 'manual', now(), 'running', now() - interval '1 minute') RETURNING id::text`, task.ID).Scan(&runID)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ReconcileRunsTask(b.pool, jobs.NewAnnouncer(jobs.AnnouncerOptions{Publisher: b.pub, Logger: dbtest.Logger(t)})).Run(ctx)
	if err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v", n, err)
	}
	if ev := strings.Join(b.pub.runEvents(runID), " "); ev != "task.run.failed" {
		t.Fatalf("events: %q", ev)
	}
}
