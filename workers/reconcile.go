package workers

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/jobs"
)

// ReconcileRunsTask finishes orphaned runs every minute — runs left queued
// or running although their River job is finalised or gone — and
// announces each one's final status to its owner (task.run.*), so an
// overlap-skip task is never blocked by one for longer than that.
func ReconcileRunsTask(q db.DB, announcer *jobs.Announcer) MaintenanceTask {
	return MaintenanceTask{Name: "reconcile_runs", Every: time.Minute, Run: func(ctx context.Context) (int64, error) {
		runs, err := jobs.ReconcileOrphanedRuns(ctx, q, 1000)
		announcer.Announce(context.WithoutCancel(ctx), runs...)
		return int64(len(runs)), err
	}}
}
