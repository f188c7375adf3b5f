// Package jobs owns scheduled and on-demand work up to River: tasks and
// their cron schedules; runs, their attempts and their state machine
// (runstate.go: every write of task_runs and task_run_attempts); the claim
// loop that turns due ticks into runs and River jobs (claim.go, its
// pacing in pacing.go, the insert notifier in insertnotify.go);
// triggers, retries, cancels and backfills; the Announcer every run status
// change goes through; the cluster's view of the queue (rescue of a dead
// node's jobs, status and scaler figures); and the seam to River's own
// schema (riverschema.go: every statement on River's tables).
//
// The API and the run worker (package workers) share it as their data
// layer; it imports neither.
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

// runInsertOpts gives the job its task's retry budget, its run's priority
// (River's: 1 is fetched first) and its task's project in its metadata,
// which River's producers share their fetches by (fairfetch.sql).
func runInsertOpts(project string, maxAttempts, priority int) *river.InsertOpts {
	return &river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: maxAttempts, Priority: max(priority, 1),
		Metadata: projectMetadata(project)}
}

// Publisher delivers an event to the stream of one project, which every
// member's sockets follow. The realtime bus implements it
// (workers.Publisher is a superset).
type Publisher interface {
	PublishProject(ctx context.Context, projectID, event string, payload any) error
}

// EventName is the realtime event announcing a run's new status.
func EventName(status string) string { return "task.run." + status }
