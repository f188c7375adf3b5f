// Package jobs owns the producer side of the job queue: job argument types,
// cron schedules, claiming due tasks and enqueueing runs. The web API
// enqueues through this package and never imports workers.
//
// It also owns the tasks and task_runs tables: every query on them lives
// here, so the API, the claim loop and the run worker share one data layer.
package jobs

import (
	"context"

	"github.com/riverqueue/river"
)

// RunArgs is the River job that performs one task run. The run row holds
// everything else, so a job stays valid when its task is edited.
type RunArgs struct {
	RunID  string `json:"run_id"`
	TaskID string `json:"task_id"`
}

// Kind is River's job kind.
func (RunArgs) Kind() string { return runJobKind }

// runInsertOpts gives the job its task's retry budget.
func runInsertOpts(maxAttempts int) *river.InsertOpts {
	return &river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: maxAttempts}
}

// Publisher delivers an event to one user's sockets. The realtime bus
// implements it (workers.Publisher is a superset).
type Publisher interface {
	PublishUser(ctx context.Context, userID, event string, payload any) error
}

// EventName is the realtime event announcing a run's new status.
func EventName(status string) string { return "task.run." + status }
