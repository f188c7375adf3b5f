package jobs

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/switchboard/switchboard/infra/db"
)

// The insert notifier: River's producers fetch an available job whose
// scheduled_at has passed, and hear of new ones through River's insert
// notification, else on their next poll. A task-run job that becomes
// fetchable later than it was inserted (a tick claimed ahead, a delayed
// run, a retry, a snooze) would wait for that poll, or for River's
// scheduler, which makes a scheduled job available on a 5 s tick, without
// notifying. The claim loop's insert notifier sends the notification at
// the job's time instead, so that every replica's producers fetch it then.

// notifyShare: times this close share one notification (a burst
// of snoozes or retries costs one round trip, not one each).
const notifyShare = 5 * time.Millisecond

// FetchableAt has River's producers notified at t, when a task-run job of
// this node becomes fetchable then (a retry, a snooze): River makes such a
// job available, or scheduled and made available by its scheduler up to
// 5 s early, without telling the producers, which would find it on their
// next poll. A time already past is notified at once; without LISTEN
// nobody hears it and the poll remains.
func (c *Claimer) FetchableAt(t time.Time) {
	if c.pace.notifier != nil {
		c.pace.notifier.add([]time.Time{t})
	}
}

// insertNotifier sends River's insert notification at each time a
// task-run job becomes fetchable: a tick claimed ahead, a delayed run or a
// retry the claim loop found, a retry or snooze FetchableAt was told of.
type insertNotifier struct {
	db     db.DB
	schema string
	logger *slog.Logger
	wake   chan struct{}

	mu    sync.Mutex
	times []time.Time // pending, unsorted, deduplicated
}

func newInsertNotifier(q db.DB, schema string, logger *slog.Logger) *insertNotifier {
	return &insertNotifier{db: q, schema: schema, logger: logger, wake: make(chan struct{}, 1)}
}

// add notes times at which jobs become fetchable.
func (n *insertNotifier) add(times []time.Time) {
	if len(times) == 0 {
		return
	}
	n.mu.Lock()
	for _, t := range times {
		if !slices.ContainsFunc(n.times, t.Equal) {
			n.times = append(n.times, t)
		}
	}
	n.mu.Unlock()
	signal(n.wake)
}

// next returns the earliest pending time; ok false: none.
func (n *insertNotifier) next() (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.times) == 0 {
		return time.Time{}, false
	}
	return slices.MinFunc(n.times, func(a, b time.Time) int { return a.Compare(b) }), true
}

// take removes the times up to at and returns the latest of them.
func (n *insertNotifier) take(at time.Time) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	var latest time.Time
	n.times = slices.DeleteFunc(n.times, func(t time.Time) bool {
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

// loop notifies at every pending time until ctx ends.
func (n *insertNotifier) loop(ctx context.Context) {
	for {
		wait := time.Hour
		if t, ok := n.next(); ok {
			wait = time.Until(t)
		}
		timer := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-n.wake:
			timer.Stop()
			continue
		case <-timer.C:
		}
		// Times less than notifyShare apart share one notification,
		// sent at the latest of them.
		if at := n.take(time.Now().Add(notifyShare)); !at.IsZero() {
			n.notify(ctx, at)
		}
	}
}

// notify sends River's insert notification for the run queue once the
// database's clock reached at (notifyInsertAt). Without LISTEN (poll-only)
// nobody hears it and the runs start on River's poll, as runs claimed at
// their tick do.
func (n *insertNotifier) notify(ctx context.Context, at time.Time) {
	if err := notifyInsertAt(ctx, n.db, n.schema, at); err != nil && ctx.Err() == nil {
		n.logger.Warn("notify river of runs due", "error", err)
	}
}
