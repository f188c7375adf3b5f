// Package jobs owns the producer side of the job queue: job argument types,
// cron schedules, claiming due tasks and enqueueing runs. The web API
// enqueues through this package and never imports workers.
//
// It also owns the tasks and task_runs tables: every query on them lives
// here, so the API, the claim loop and the run worker share one data layer.
package jobs

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

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

// OwnedRun is a run whose status changed (claimed, cancelled, an orphan
// given its final status, a dead node's run rescued) with its owner: the
// user its task.run.* event goes to (Announce).
type OwnedRun struct {
	Run     Run
	OwnerID string
}

// announceAtOnce bounds the publishes Announce has waiting at once (the
// realtime bus's append batch).
const announceAtOnce = 500

// Announce publishes each run's status (EventName) to its owner and
// returns once every publish was answered; a failed one is logged with
// msg (unless ctx ended; nil logger: slog's default). The publishes wait
// together, not one after another: a publisher that stores its events
// (the realtime bus) takes them into one append, where a loop waited a
// commit for each (a claim of 100 runs spent 100 appends announcing
// them). Their order in the owner's stream is therefore not the order of
// runs. A publisher's panic is raised again in the caller, once every
// other publish was answered, where a recover of the caller's sees it.
func Announce(ctx context.Context, pub Publisher, logger *slog.Logger, msg string, runs []OwnedRun) {
	if pub == nil || len(runs) == 0 {
		return
	}
	logger = cmp.Or(logger, slog.Default())
	slots := make(chan struct{}, announceAtOnce)
	var wg sync.WaitGroup
	var panicked atomic.Pointer[any]
	for _, r := range runs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					panicked.CompareAndSwap(nil, &v)
				}
				<-slots
			}()
			if err := pub.PublishUser(ctx, r.OwnerID, EventName(r.Run.Status), r.Run); err != nil && ctx.Err() == nil {
				logger.Warn(msg, "run_id", r.Run.ID, "status", r.Run.Status, "error", err)
			}
		})
	}
	wg.Wait()
	if v := panicked.Load(); v != nil {
		panic(*v)
	}
}
