package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/jobs"
)

// ReconcileRunsTask finishes orphaned runs every minute — runs left queued
// or running although their River job is finalised or gone — and
// announces each one's final status to its owner (task.run.*), so an
// overlap-skip task is never blocked by one for longer than that.
func ReconcileRunsTask(q db.DB, pub Publisher, logger *slog.Logger) MaintenanceTask {
	return MaintenanceTask{Name: "reconcile_runs", Every: time.Minute, Run: func(ctx context.Context) (int64, error) {
		runs, err := jobs.ReconcileOrphanedRuns(ctx, q, 1000)
		jobs.Announce(context.WithoutCancel(ctx), pub, logger, "publish run event", runs)
		return int64(len(runs)), err
	}}
}
