package jobs

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/switchboard/switchboard/infra/db"
)

// The claim loop's pacing: when it claims, when it only looks, how long it
// sleeps in between, how far ahead of their tick it claims, and who is
// told what each look found. The claim transaction itself (claim.go) knows
// none of it but the lead.

// Pacing configures the claim loop's pacing; zero values mean defaults.
type Pacing struct {
	// MaxSleep is the longest the loop sleeps between claims while no
	// notice can wake it (no Lookout, or it is not Listening); default 1s.
	MaxSleep time.Duration
	// IdlePoll is the longest it sleeps while the Lookout is Listening: a
	// task created or made due sooner on any replica wakes it (Wake, on
	// the TasksChannel notice), so the poll is only a safety net. Default
	// 30s; never shorter than MaxSleep.
	IdlePoll time.Duration
	// StartJitter spreads replicas' first claims over [0, StartJitter);
	// default 500ms.
	StartJitter time.Duration
	// Lead is how long before its tick a task with overlap allow may be
	// claimed (see InsertAvailable: the run still starts at its tick, and the
	// River client must have that middleware). Zero claims every tick once
	// due; at most MaxLead.
	Lead time.Duration
	// Lookout is the replica around the loop; nil: nothing hears the
	// task notices and nobody is told what the looks found.
	Lookout Lookout
}

// MaxLead bounds Pacing.Lead.
const MaxLead = 5 * time.Second

// Lookout is what the claim loop's pacing asks of the replica around it
// (workers.Coordinator).
type Lookout interface {
	// Listening reports whether Notify hears every replica's task changes
	// (TasksChannel is LISTENed).
	Listening() bool
	// Outlook is told what each of the loop's looks found (the idle
	// question, and the one after every claim). It returns how long before
	// the earliest tick or job it wants to be told again; the loop then
	// looks that much earlier than it would to claim (0: no earlier).
	Outlook(Outlook) time.Duration
}

// Outlook is what a look of the claim loop found, cluster-wide.
type Outlook struct {
	// Claim is how long until the earliest tick may be claimed (0 or
	// less: now; NoWork: no active task has one).
	Claim time.Duration
	// Job is how long until the earliest task-run job that waits for a
	// later time becomes fetchable (NoWork: none waits).
	Job time.Duration
	// Available: a task-run job is fetchable now, or waits past its time
	// for River's scheduler (scheduled or retryable: a client must run).
	Available bool
}

// NoWork is an Outlook duration when there is nothing to wait for.
const NoWork = time.Duration(1<<63 - 1)

// TasksChannel is the NOTIFY channel on which a task's insert or update
// that makes it due sooner rings every replica at commit (a trigger,
// migrations/00013): it wakes the loop (Wake).
const TasksChannel = "switchboard_tasks"

// pacer is a claim loop's pacing state.
type pacer struct {
	Pacing
	// noLead: the River client lacks InsertAvailable; ticks are claimed due.
	noLead   atomic.Bool
	wake     chan struct{}
	look     chan struct{}
	ahead    time.Duration   // the last Outlook's answer (the loop's goroutine only)
	notifier *insertNotifier // nil without a River client
}

func newPacer(opts ClaimerOptions) *pacer {
	p := opts.Pacing
	p.MaxSleep = cmp.Or(p.MaxSleep, time.Second)
	p.IdlePoll = max(cmp.Or(p.IdlePoll, 30*time.Second), p.MaxSleep)
	p.StartJitter = cmp.Or(p.StartJitter, 500*time.Millisecond)
	p.Lead = min(max(p.Lead, 0), MaxLead)
	pc := &pacer{Pacing: p, wake: make(chan struct{}, 1), look: make(chan struct{}, 1)}
	if opts.River != nil {
		pc.notifier = newInsertNotifier(opts.DB, opts.River.Schema(), opts.Logger)
	}
	return pc
}

// Wake ends the loop's sleep and has it claim: a task was created or its
// schedule changed.
func (c *Claimer) Wake() { signal(c.pace.wake) }

// Look has the loop look at once, without claiming, and tell the Lookout
// what it found (one statement).
func (c *Claimer) Look() { signal(c.pace.look) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *Claimer) loop(ctx context.Context) {
	wait, claim := rand.N(c.pace.StartJitter), true
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.pace.wake:
			t.Stop()
			claim = true
		case <-c.pace.look:
			t.Stop()
			claim = false
		case <-t.C:
		}
		wait, claim = c.round(ctx, claim)
	}
}

// round claims until no full batch remains and returns how long to sleep
// (until the earliest due tick, at most the idle poll) and whether to
// claim when it ends. A round that woke with nothing known to be due (the
// idle poll passed) first asks whether anything is: on an idle replica
// that one statement is the whole round, instead of a claim transaction
// and then the question. A round woken for a due tick, or by Wake,
// claims at once.
func (c *Claimer) round(ctx context.Context, claim bool) (time.Duration, bool) {
	if c.Paused() {
		return c.idlePoll(), false
	}
	if !claim {
		next, job, ok := c.untilNext(ctx)
		if !ok || next > 0 {
			return c.sleepUntil(next, job, ok)
		}
	}
	full, err := c.claimBatch(ctx)
	if err != nil {
		return c.pace.MaxSleep, true
	}
	if full && !c.drain(ctx) {
		return c.pace.MaxSleep, true
	}
	return c.sleepUntil(c.untilNext(ctx))
}

// untilNext reads the backlog into the metrics and returns how long until
// the earliest due tick (0 or less: due now) and until the earliest run
// job that becomes fetchable later (see dueStats); ok is false when they
// could not be read. That job's time, when the loop would sleep past it,
// is handed to the insert notifier: the producers are notified at it.
func (c *Claimer) untilNext(ctx context.Context) (next, job time.Duration, ok bool) {
	due, next, jobAt, available, err := dueStats(ctx, c.opts.DB, c.lead())
	if err != nil {
		if ctx.Err() == nil {
			c.opts.Logger.Warn("read due tasks", "error", err)
		}
		return 0, 0, false
	}
	c.opts.Metrics.backlog(due, max(-next, 0))
	job = NoWork
	if !jobAt.IsZero() {
		job = time.Until(jobAt)
	}
	if due > 0 {
		next = min(next, 0)
	}
	if l := c.pace.Lookout; l != nil {
		c.pace.ahead = l.Outlook(Outlook{Claim: next, Job: job, Available: available})
	}
	if c.pace.notifier == nil {
		return next, NoWork, true
	}
	if job <= c.idlePoll() {
		c.pace.notifier.add([]time.Time{jobAt})
	}
	return next, job, true
}

// sleepUntil turns the time until the next tick and until the next job
// becomes fetchable into the loop's sleep and whether to claim when it
// ends. That job (handed to the insert notifier by untilNext) wakes it
// just after, without a claim: the question then finds the next one. When the Lookout asked to be
// told again ahead of the work, the loop looks (no claim) that long before
// the tick or the job.
func (c *Claimer) sleepUntil(next, job time.Duration, ok bool) (time.Duration, bool) {
	wait, claim := c.sleepForTick(next, ok)
	if !ok {
		return wait, claim
	}
	if job > 0 && job < wait-time.Millisecond { // (job may be NoWork)
		wait, claim = job+time.Millisecond, false
	}
	if a := c.pace.ahead; a > 0 {
		for _, t := range []time.Duration{next, job} {
			if early := t - a; early > 0 && early < wait {
				wait, claim = early, false
			}
		}
	}
	return wait, claim
}

// sleepForTick is sleepUntil for the next tick alone.
func (c *Claimer) sleepForTick(next time.Duration, ok bool) (time.Duration, bool) {
	switch poll := c.idlePoll(); {
	case !ok:
		return c.pace.MaxSleep, true
	case next <= 0:
		// Due but locked by another claimer's transaction: look again soon.
		return 20 * time.Millisecond, true
	case next > poll:
		return poll, false
	}
	return next + time.Millisecond, true
}

// idlePoll is the longest sleep now: IdlePoll while every replica's task
// changes wake the loop, else MaxSleep.
func (c *Claimer) idlePoll() time.Duration {
	if l := c.pace.Lookout; l != nil && l.Listening() {
		return c.pace.IdlePoll
	}
	return c.pace.MaxSleep
}

// lead is how far ahead ticks are claimed now.
func (c *Claimer) lead() time.Duration {
	if c.pace.noLead.Load() {
		return 0
	}
	return c.pace.Lead
}

// leadOff claims ticks once due from now on: the River client lacks
// InsertAvailable.
func (c *Claimer) leadOff() { c.pace.noLead.Store(true) }

// notifyAhead hands the ticks claimed ahead (committed) to the insert
// notifier: the producers are notified at each.
func (c *Claimer) notifyAhead(claimed []claimedTask) {
	if c.pace.notifier == nil {
		return
	}
	var ticks []time.Time
	for _, ct := range claimed {
		if ct.ahead {
			ticks = append(ticks, ct.scheduledFor)
		}
	}
	c.pace.notifier.add(ticks)
}

// DueStats returns how many active tasks are due and how long until the
// earliest tick (negative: how overdue it is; MaxInt64 without tasks).
func DueStats(ctx context.Context, q db.DB) (due int, untilNext time.Duration, err error) {
	due, untilNext, _, _, err = dueStats(ctx, q, 0)
	return due, untilNext, err
}

// dueStats is DueStats with untilNext the time until the earliest claim
// (a tick of an overlap-allow task may be claimed lead ahead of it), and
// jobAt the earliest future scheduled_at of a task-run job that waits for
// it (zero: none): a delayed on-demand run, a tick claimed ahead, a retry
// or a snooze, whether River holds it available, scheduled or retryable;
// available is whether a task-run job is fetchable now or overdue for
// River's scheduler. It is the claim loop's one idle statement.
func dueStats(ctx context.Context, q db.DB, lead time.Duration) (due int, untilNext time.Duration, jobAt time.Time, available bool, err error) {
	var secs *float64
	var at *time.Time
	err = q.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM tasks WHERE active AND next_run_at <= now()),
		       -- why: two index-ordered mins (tasks_due_idx), the second only
		       -- with a lead; a min over an expression would read every task.
		       EXTRACT(EPOCH FROM LEAST(
		           (SELECT min(next_run_at) FROM tasks WHERE active AND next_run_at IS NOT NULL),
		           CASE WHEN $1::interval > '0s' THEN (SELECT min(next_run_at) FROM tasks
		               WHERE active AND next_run_at IS NOT NULL AND overlap = 'allow') - $1::interval END
		       ) - now())::float8,
		       `+runJobsNextSQL+`,
		       `+runJobsDueSQL, lead).
		Scan(&due, &secs, &at, &available)
	if err != nil {
		return 0, 0, time.Time{}, false, fmt.Errorf("due stats: %w", err)
	}
	if at != nil {
		jobAt = *at
	}
	// A tick more than a century away (or none) is "never" for the loop: a
	// float that large would overflow the Duration into "due now".
	if secs == nil || *secs > 100*365*24*3600 {
		return due, NoWork, jobAt, available, nil
	}
	return due, time.Duration(*secs * float64(time.Second)), jobAt, available, nil
}
