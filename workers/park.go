package workers

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchboard/switchboard/jobs"
)

// Parking: a worker replica's River client stops while nothing is due
// anywhere in the cluster (it is parked) and starts again when work
// appears. Running, River polls for jobs every second and its elector,
// scheduler and reports add about two round trips a second more, on every
// replica, idle or not; parked, the replica's only statements are its own
// (heartbeat, claim loop, maintenance), about one a second.
//
// What wakes a parked client:
//   - River's insert notification (jobs.InsertChannel, heard on the
//     bus's LISTEN connection, answered by the Coordinator): an immediate
//     job inserted by any replica, a tick claimed ahead reaching its time,
//     a delayed run, retry or snooze becoming fetchable (the claim loop's
//     insert notifier), jobs the cluster rescued from a dead node (Wake);
//   - the claim loop's outlook (Outlook): a tick, or a job waiting for a
//     later time, within UnparkLead, or a job fetchable now that nobody
//     announced (River UI's retry). The loop looks again UnparkLead before
//     the earliest work it knows of while the client is parked.
//
// It parks only when the claim loop's look finds nothing due within
// ParkHorizon and nothing fetchable, no job runs here, and nothing
// happened here (a job started or ended, a wake) for ParkOptions.After.
// Poll-only replicas never park: nothing could wake them.
//
// While every replica is parked there is no River leader: River's
// maintenance (its job cleaner, the rescue of jobs stuck for hours, the
// daily reindex) runs whenever a client runs again. The cluster's own
// rescue of a dead node's jobs does not need River (jobs.NodeJobs), and
// neither does ours (maintenance loop).

// ParkHorizon: a replica does not park while work is due within it.
const ParkHorizon = 10 * time.Second

// UnparkLead is how long before the earliest known work a parked client
// starts again (starting takes tens of milliseconds; River's scheduler
// must also have run once for a retry to become fetchable).
const UnparkLead = 5 * time.Second

// ParkOptions configure parking; the zero value never parks.
type ParkOptions struct {
	// After is how long a worker replica's River client must have been
	// idle before it parks; 0: it never parks.
	After time.Duration
}

// activity is the River work middleware that tells parking a job runs
// here, and when the last one began or ended.
type activity struct {
	river.MiddlewareDefaults
	inflight atomic.Int64
	last     atomic.Int64 // unix nanoseconds
}

func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

// Work counts the job in while it runs.
func (a *activity) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	a.inflight.Add(1)
	a.touch()
	defer func() {
		a.touch()
		a.inflight.Add(-1)
	}()
	return doInner(ctx)
}

// quietFor is how long nothing has run here (0 while a job runs).
func (a *activity) quietFor() time.Duration {
	if a.inflight.Load() > 0 {
		return 0
	}
	return time.Since(time.Unix(0, a.last.Load()))
}

// Parked reports whether the client is parked (or parking).
func (r *River) Parked() bool { return r.parked.Load() }

// Wake starts a parked client again (soon, on its own goroutine): work
// was announced. It also counts as activity.
func (r *River) Wake() {
	if r.act == nil {
		return
	}
	r.act.touch()
	signal(r.wakeCh)
}

// Outlook is told what the claim loop's looks found (jobs.Lookout, through
// the Coordinator): it wakes the client when work is near, lets it park
// when none is, and returns how long before the earliest work the loop
// should look again (UnparkLead while parked or about to be, else 0).
func (r *River) Outlook(o jobs.Outlook) time.Duration {
	if r.act == nil {
		return 0
	}
	if o.Available || o.Claim <= UnparkLead || o.Job <= UnparkLead {
		r.Wake()
		return 0
	}
	if o.Claim <= ParkHorizon || o.Job <= ParkHorizon || r.localWorkWithin(ParkHorizon) {
		if r.Parked() {
			return UnparkLead
		}
		return 0
	}
	signal(r.parkCh)
	return UnparkLead
}

// FetchableAt tells parking that a job of this replica becomes fetchable at t:
// a retry or a snooze the run worker just returned to River. The claim
// loop's look cannot tell yet (River records the retry after Work
// returns, in a batch), so River keeps running while t is within
// ParkHorizon and, parked, starts again UnparkLead before t. The run
// worker has it called (Coordinator.FetchableAt).
func (r *River) FetchableAt(t time.Time) {
	if r.act == nil {
		return
	}
	now, at := time.Now().UnixNano(), t.UnixNano()
	for {
		old := r.workAt.Load()
		if old > now && old <= at {
			return // an earlier one is pending
		}
		if r.workAt.CompareAndSwap(old, at) {
			break
		}
	}
	signal(r.replanCh)
}

// localWorkWithin: a retry or snooze of this replica falls within d.
func (r *River) localWorkWithin(d time.Duration) bool {
	at := r.workAt.Load()
	return at > time.Now().UnixNano() && time.Until(time.Unix(0, at)) <= d
}

// parkLoop parks and unparks the client on the signals of Outlook and
// Wake; the only goroutine that does, so Start and Stop never race.
func (r *River) parkLoop(ctx context.Context) {
	recheck := time.NewTimer(r.park.After)
	defer recheck.Stop()
	local := time.NewTimer(time.Hour) // UnparkLead before this replica's next retry or snooze
	local.Stop()
	defer local.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.replanCh:
			if at := r.workAt.Load(); at > time.Now().UnixNano() {
				local.Reset(max(time.Until(time.Unix(0, at))-UnparkLead, 0))
			}
		case <-local.C:
			r.unpark(ctx)
			recheck.Reset(r.park.After)
		case <-r.wakeCh:
			r.unpark(ctx)
			// Ask again once it could have been idle long enough: only
			// a look tells whether nothing is due any more.
			recheck.Reset(r.park.After)
		case <-r.parkCh:
			if r.localWorkWithin(ParkHorizon) {
				continue // the timer above wakes it, if it parks later
			}
			if quiet := r.act.quietFor(); quiet < r.park.After {
				// Not yet: look again once it would have been quiet
				// long enough (a job, a wake meanwhile push it later).
				recheck.Reset(r.park.After - quiet)
				continue
			}
			r.parkNow(ctx)
		case <-recheck.C:
			// The claim loop's look: it tells Outlook whether to park.
			if r.look != nil && !r.Parked() {
				r.look()
			}
		}
	}
}

// parkNow stops the client unless a drain or Stop began, or it is parked
// already. A job fetched meanwhile keeps it running until the job ends
// (River's Stop waits for it, up to StopTimeout or until the park loop's
// ctx ends): it counts as parked all the same, since fetching stopped, and
// unpark waits for that stop to finish before it starts the client again.
func (r *River) parkNow(ctx context.Context) {
	r.mu.Lock()
	if r.parked.Load() || r.stopping || r.drained != nil {
		r.mu.Unlock()
		return
	}
	r.parked.Store(true)
	r.parks.Add(1)
	r.mu.Unlock()
	// why: the stop runs without mu. Drain and Stop take mu, and this stop
	// may wait up to StopTimeout for a job fetched meanwhile: a drain (its
	// socket drain, the node marked draining) must not wait behind it.
	// River lets their stops begin beside this one; unpark, the only
	// Start, runs on this goroutine.
	sctx, cancel := context.WithTimeout(ctx, r.stopTimeout)
	defer cancel()
	switch err := r.client.Stop(sctx); {
	case err == nil:
		r.logger.Debug("river parked: nothing due")
	case ctx.Err() == nil:
		r.logger.Info("river parks once its running job ends", "error", err)
	}
}

// unpark starts a parked client again; a failure is retried after a
// second (the database may be away), unless a drain or Stop began.
func (r *River) unpark(ctx context.Context) {
	for {
		if !r.Parked() {
			return // the common case: a notification while running
		}
		// A park whose stop waited for a running job: that stop must end
		// before a Start does anything.
		if stopped := r.client.Stopped(); stopped != nil {
			select {
			case <-stopped:
			case <-ctx.Done():
				return
			}
		}
		// River's Start cannot be bounded (its context is the client's
		// for good) and a Stop or drain waits for it: it starts only once
		// the database answered a ping within a bound.
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := r.ping(pctx)
		cancel()
		r.mu.Lock()
		if !r.parked.Load() || r.stopping || r.drained != nil {
			r.mu.Unlock()
			return
		}
		if err == nil {
			err = r.client.Start(context.WithoutCancel(ctx))
		}
		if err == nil {
			r.parked.Store(false)
			r.act.touch()
			r.mu.Unlock()
			r.logger.Debug("river unparked: work is due")
			return
		}
		r.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		r.logger.Warn("river could not start again; retrying", "error", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Parks is how many times the client parked.
func (r *River) Parks() int64 { return r.parks.Load() }
