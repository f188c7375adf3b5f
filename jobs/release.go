package jobs

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// Claiming ahead (Pacing.Lead): a tick of an overlap-allow task may
// be claimed up to Lead before it is due, in the same transaction as a tick
// claimed on time (next_run_at advances in the transaction that inserts the
// run: exactly once holds unchanged). Its River job is inserted available
// with scheduled_at = the tick, so no producer can fetch it before its time
// (River fetches state 'available' AND scheduled_at <= now()), and at the
// tick the claimer sends River's insert notification so that the producers
// of every replica fetch it at once rather than on their next poll. River
// would insert a job with a future ScheduledAt as 'scheduled' and release it
// on its scheduler's 5 s tick; ReleaseAtTick, a River insert middleware,
// keeps it available instead.

// releaseShare: release times this close share one notification (a burst
// of snoozes or retries costs one round trip, not one each).
const releaseShare = 5 * time.Millisecond

// ReleaseAt has River's producers notified at t, when a task-run job of
// this node becomes fetchable then (a retry, a snooze): River makes such a
// job available, or scheduled and released by its scheduler up to 5 s
// early, without telling the producers, which would find it on their next
// poll. A time already past is notified at once; without LISTEN nobody
// hears it and the poll remains.
func (c *Claimer) ReleaseAt(t time.Time) {
	if c.pace.release != nil {
		c.pace.release.add([]time.Time{t})
	}
}

// releaser sends River's insert notification at each time a task-run job
// becomes fetchable: a tick claimed ahead, a delayed run or a retry the
// claim loop found, a retry or snooze ReleaseAt was told of.
type releaser struct {
	db     db.DB
	schema string
	logger *slog.Logger
	wake   chan struct{}

	mu    sync.Mutex
	ticks []time.Time // pending, unsorted, deduplicated
}

func newReleaser(q db.DB, schema string, logger *slog.Logger) *releaser {
	return &releaser{db: q, schema: schema, logger: logger, wake: make(chan struct{}, 1)}
}

// add notes ticks claimed ahead (committed).
func (r *releaser) add(ticks []time.Time) {
	if len(ticks) == 0 {
		return
	}
	r.mu.Lock()
	for _, t := range ticks {
		if !slices.ContainsFunc(r.ticks, t.Equal) {
			r.ticks = append(r.ticks, t)
		}
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// next returns the earliest pending tick; ok false: none.
func (r *releaser) next() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ticks) == 0 {
		return time.Time{}, false
	}
	return slices.MinFunc(r.ticks, func(a, b time.Time) int { return a.Compare(b) }), true
}

// take removes the ticks up to at and returns the latest of them.
func (r *releaser) take(at time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var latest time.Time
	r.ticks = slices.DeleteFunc(r.ticks, func(t time.Time) bool {
		if t.After(at) {
			return false
		}
		if t.After(latest) {
			latest = t
		}
		return true
	})
	return latest
}

// loop notifies at every pending tick until ctx ends.
func (r *releaser) loop(ctx context.Context) {
	for {
		wait := time.Hour
		if t, ok := r.next(); ok {
			wait = time.Until(t)
		}
		timer := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-r.wake:
			timer.Stop()
			continue
		case <-timer.C:
		}
		// Times less than releaseShare apart share one notification,
		// sent at the latest of them.
		if tick := r.take(time.Now().Add(releaseShare)); !tick.IsZero() {
			r.notify(ctx, tick)
		}
	}
}

// notify sends River's insert notification for the run queue once the
// database's clock reached tick (notifyInsertAt). Without LISTEN
// (poll-only) nobody hears it and the runs start on River's poll, as runs
// claimed at their tick do.
func (r *releaser) notify(ctx context.Context, tick time.Time) {
	if err := notifyInsertAt(ctx, r.db, r.schema, tick); err != nil && ctx.Err() == nil {
		r.logger.Warn("notify river of runs due", "error", err)
	}
}

// withdrawAhead deletes, in the caller's transaction, the task's runs
// claimed ahead of a tick that is still in the future, with their River
// jobs: a task changed (paused, rescheduled, edited) before its tick gets
// the tick decided anew, as if it had not been claimed yet. A run whose
// job a producer already fetched (the tick came) is left alone
// (deleteAheadJobs). It returns the earliest withdrawn tick (zero: none),
// for the caller to keep due.
func withdrawAhead(ctx context.Context, tx pgx.Tx, taskID string) (time.Time, error) {
	runs, err := deleteAheadJobs(ctx, tx, taskID)
	if err != nil || len(runs) == 0 {
		return time.Time{}, err
	}
	return withdrawRuns(ctx, tx, taskID, runs)
}
