package jobs

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
)

// OwnedRun is a run whose status changed, with the project its task
// belongs to: the project whose stream its task.run.* event goes to.
type OwnedRun struct {
	Run       Run
	ProjectID string
	// Ended is the attempt whose recorded outcome made this change (a run
	// worker's announcement); nil for any other.
	Ended *EndedAttempt
}

// EndedAttempt is an attempt as its run worker recorded it: the task's
// action type and the attempt's outcome.
type EndedAttempt struct {
	Action  string
	Outcome Outcome
}

// AnnouncerOptions configure an Announcer; zero values mean defaults.
type AnnouncerOptions struct {
	// Publisher delivers the events; nil publishes nothing.
	Publisher Publisher
	// Metrics counts the transitions; nil counts nothing.
	Metrics *Metrics
	// Logger hears of a publish that failed; default: discard.
	Logger *slog.Logger
}

// Announcer announces runs' status changes: it measures each one
// (switchboard_task_runs_total; a first attempt's start in
// switchboard_run_queue_wait_seconds and, for a tick, in
// switchboard_task_due_lag_seconds; an ended attempt in
// switchboard_run_duration_seconds) and publishes task.run.<status>
// (EventName) to the stream of the run's project. Every transition a user is told of goes
// through one: a claim's, an API call's, a worker's, a rescue's, a
// reconcile's. A nil *Announcer announces nothing.
type Announcer struct {
	opts AnnouncerOptions
}

// NewAnnouncer builds an Announcer.
func NewAnnouncer(opts AnnouncerOptions) *Announcer {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	return &Announcer{opts: opts}
}

// announceAtOnce bounds the publishes Announce has waiting at once (the
// realtime bus's append batch).
const announceAtOnce = 500

// Announce counts the runs' new statuses and publishes each to its project,
// and returns once every publish was answered; a failed one is logged
// (unless ctx ended). The publishes wait together, not one after another:
// a publisher that stores its events (the realtime bus) takes them into
// one append, where a loop waited a commit for each (a claim of 100 runs
// spent 100 appends announcing them). Their order in the project's stream
// is therefore not the order of runs; two calls keep theirs. A
// publisher's panic is raised again in the caller, once every other
// publish was answered, where a recover of the caller's sees it.
func (a *Announcer) Announce(ctx context.Context, runs ...OwnedRun) {
	if a == nil || len(runs) == 0 {
		return
	}
	a.count(runs)
	switch {
	case a.opts.Publisher == nil:
	case len(runs) == 1:
		a.publish(ctx, runs[0])
	default:
		a.publishAll(ctx, runs)
	}
}

// count adds the runs to switchboard_task_runs_total by their status, and
// their starts and ended attempts to the run histograms.
func (a *Announcer) count(runs []OwnedRun) {
	m := a.opts.Metrics
	if m == nil {
		return
	}
	for _, r := range runs {
		if r.Run.Status == StatusRunning {
			m.started(r.Run)
		}
		if r.Ended != nil {
			m.attempt(r.Ended.Action, r.Ended.Outcome)
		}
	}
	if len(runs) == 1 { // a worker's announcement: no map
		m.RunStatus(runs[0].Run.Status, 1)
		return
	}
	n := map[string]int{}
	for _, r := range runs {
		n[r.Run.Status]++
	}
	for status, k := range n {
		m.RunStatus(status, k)
	}
}

func (a *Announcer) publish(ctx context.Context, r OwnedRun) {
	if err := a.opts.Publisher.PublishProject(ctx, r.ProjectID, EventName(r.Run.Status), r.Run); err != nil && ctx.Err() == nil {
		a.opts.Logger.WarnContext(ctx, "publish run event", "run_id", r.Run.ID, "status", r.Run.Status, "error", err)
	}
}

// publishAll publishes announceAtOnce runs at a time, each on a goroutine
// of its own.
func (a *Announcer) publishAll(ctx context.Context, runs []OwnedRun) {
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
			a.publish(ctx, r)
		})
	}
	wg.Wait()
	if v := panicked.Load(); v != nil {
		panic(*v)
	}
}
