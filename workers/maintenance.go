package workers

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/ratelimit"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/realtime"
	"github.com/switchboard/switchboard/realtime/stream"
)

// DefaultRunRetention is how long finished runs are kept by default.
const DefaultRunRetention = 30 * 24 * time.Hour

// Maintenance declares every periodic housekeeping task of the service, in
// one place: adding one is one entry here (and, if it needs something new,
// a field of Options); its name is its row in maintenance_schedule. A task
// whose dependency is not configured is left out.
func Maintenance(o Options) []MaintenanceTask {
	var tasks []MaintenanceTask
	if o.DB != nil {
		tasks = append(tasks,
			PruneRunsTask(o.DB, o.RunRetention),
			ReconcileRunsTask(o.DB, jobs.NewAnnouncer(jobs.AnnouncerOptions{
				Publisher: cmp.Or[Publisher](o.Publisher, LogPublisher{Logger: o.Logger}), Metrics: o.Metrics, Logger: o.Logger})),
			dbTask("reap_ws_tickets", time.Minute, o.DB, realtime.ReapTickets),
			PruneStreamsTask(o.DB, o.StreamRetention),
			dbTask("delete_spilled_bus_messages", time.Minute, o.DB, func(ctx context.Context, q db.DB) (int64, error) {
				return realtime.DeleteSpilled(ctx, q, realtime.SpillRetention)
			}),
			dbTask("prune_ended_sessions", 10*time.Minute, o.DB, accounts.PruneEndedSessions))
	}
	if o.DB != nil && o.RateLimitRetention > 0 {
		tasks = append(tasks, dbTask("ratelimit_prune", time.Minute, o.DB, func(ctx context.Context, q db.DB) (int64, error) {
			return ratelimit.Prune(ctx, q, time.Now().Add(-o.RateLimitRetention))
		}))
	}
	if o.PruneIdempotency != nil {
		tasks = append(tasks, MaintenanceTask{Name: "idempotency_prune", Every: 10 * time.Minute, Run: o.PruneIdempotency})
	}
	if o.ReapNodes != nil {
		// Nodes silent for over a minute, their running jobs rescued first
		// should no heartbeat have done it.
		tasks = append(tasks, MaintenanceTask{Name: "reap_cluster_nodes", Every: time.Minute, Run: o.ReapNodes})
	}
	return tasks
}

// PruneRunsTask deletes finished runs older than retention (default
// DefaultRunRetention) every hour.
func PruneRunsTask(q db.DB, retention time.Duration) MaintenanceTask {
	retention = cmp.Or(retention, DefaultRunRetention)
	return dbTask("prune_runs", time.Hour, q, func(ctx context.Context, q db.DB) (int64, error) {
		return jobs.PruneRuns(ctx, q, retention)
	})
}

// PruneStreamsDeadline bounds one run of prune_streams; what it leaves is
// pruned by the next run (a minute later), so a backlog never makes one
// run reach MaintenanceTimeout.
const PruneStreamsDeadline = 30 * time.Second

// PruneStreamsTask applies the streams' retention every minute: events
// beyond a stream's last MaxEvents or older than MaxAge are deleted
// (stream.Prune: its cost is that of what it deletes, not of the table).
func PruneStreamsTask(q db.DB, r stream.Retention) MaintenanceTask {
	return dbTask("prune_streams", time.Minute, q, func(ctx context.Context, q db.DB) (int64, error) {
		return pruneStreams(ctx, q, r, PruneStreamsDeadline)
	})
}

// pruneStreams prunes within deadline; reaching it is not a failure.
func pruneStreams(ctx context.Context, q db.DB, r stream.Retention, deadline time.Duration) (int64, error) {
	dctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	res, err := stream.Prune(dctx, q, r)
	if err != nil && ctx.Err() == nil && errors.Is(dctx.Err(), context.DeadlineExceeded) {
		return res.Deleted, nil // the next run goes on
	}
	return res.Deleted, err
}

func dbTask(name string, every time.Duration, q db.DB, run func(context.Context, db.DB) (int64, error)) MaintenanceTask {
	return MaintenanceTask{Name: name, Every: every, Run: func(ctx context.Context) (int64, error) { return run(ctx, q) }}
}

// MaintenanceTask is one idempotent housekeeping step (prune old runs, reap
// expired tickets, ...), run once every Every by whichever worker replica's
// MaintenanceLoop claims the period.
type MaintenanceTask struct {
	Name  string
	Every time.Duration
	Run   func(ctx context.Context) (affected int64, err error)
}
