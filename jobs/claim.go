package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/startstop"
)

// ClaimerOptions configure a claim loop; zero values mean defaults.
type ClaimerOptions struct {
	DB     db.DB
	River  *river.Client[pgx.Tx]
	Logger *slog.Logger
	// Metrics to record into; nil records nothing.
	Metrics *Metrics
	// Announcer announces the claimed runs (queued) and the runs overlap
	// cancel_other cancelled; nil: one that counts into Metrics and
	// publishes nothing.
	Announcer *Announcer
	// BatchSize is the most tasks one transaction claims; default 100.
	BatchSize int
	// Parallel is how many claim transactions run at once while a backlog
	// lasts (a claim filled its batch); default 4. Each locks its own
	// tasks (SKIP LOCKED), as the claims of separate replicas do.
	Parallel int
	// MaxSleep is the longest the loop sleeps between claims while no
	// notice can wake it (Listening is nil or false); default 1s.
	MaxSleep time.Duration
	// IdlePoll is the longest it sleeps while Listening reports true: a
	// task created or made due sooner on any replica wakes it (Notify, on
	// the TasksChannel notice), so the poll is only a safety net. Default
	// 30s; never shorter than MaxSleep.
	IdlePoll time.Duration
	// Listening reports whether Notify hears every replica's task changes
	// (TasksChannel is LISTENed); nil: it does not.
	Listening func() bool
	// StartJitter spreads replicas' first claims over [0, StartJitter);
	// default 500ms.
	StartJitter time.Duration
	// CatchUp is how late a tick may be claimed and still get its own run.
	// Ticks older than that were missed while no claimer ran: the oldest gets
	// one run, the rest are counted as skipped. Default 10s.
	CatchUp time.Duration
	// Outlook, when set, is told what each of the loop's looks found (the
	// idle question, and the one after every claim): River's parking
	// (workers.River.Outlook). It returns how long before the earliest
	// tick or job it wants to be told again; the loop then looks that much
	// earlier than it would to claim (0: no earlier).
	Outlook func(Outlook) time.Duration
	// Lead is how long before its tick a task with overlap allow may be
	// claimed (see ReleaseAtTick: the run still starts at its tick, and the
	// River client must have that middleware). Zero claims every tick once
	// due; at most MaxLead.
	Lead time.Duration
}

// MaxLead bounds ClaimerOptions.Lead.
const MaxLead = 5 * time.Second

// Claimer is the claim loop of one worker replica. Every replica runs one;
// there is no leader: FOR UPDATE SKIP LOCKED hands each due task to exactly
// one of them per tick.
type Claimer struct {
	opts   ClaimerOptions
	paused atomic.Bool
	// noLead: the River client lacks ReleaseAtTick; ticks are claimed due.
	noLead  atomic.Bool
	release *releaser
	wake    chan struct{}
	look    chan struct{}
	ahead   time.Duration // the last Outlook's answer (the loop's goroutine only)
	base    startstop.Base

	schedMu   sync.Mutex
	schedules map[string]*Schedule

	// beforeCommit runs inside the claim transaction; tests use it to die
	// between claim and commit.
	beforeCommit func(ctx context.Context, tx pgx.Tx) error
}

// NewClaimer builds a claim loop; Start runs it.
func NewClaimer(opts ClaimerOptions) *Claimer {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)).With("component", "claimer")
	opts.BatchSize = cmp.Or(opts.BatchSize, 100)
	opts.Parallel = max(cmp.Or(opts.Parallel, 4), 1)
	opts.MaxSleep = cmp.Or(opts.MaxSleep, time.Second)
	opts.IdlePoll = max(cmp.Or(opts.IdlePoll, 30*time.Second), opts.MaxSleep)
	opts.StartJitter = cmp.Or(opts.StartJitter, 500*time.Millisecond)
	opts.CatchUp = cmp.Or(opts.CatchUp, 10*time.Second)
	opts.Lead = min(max(opts.Lead, 0), MaxLead)
	if opts.Announcer == nil {
		opts.Announcer = NewAnnouncer(AnnouncerOptions{Metrics: opts.Metrics})
	}
	c := &Claimer{opts: opts, wake: make(chan struct{}, 1), look: make(chan struct{}, 1), schedules: map[string]*Schedule{}}
	if opts.River != nil {
		c.release = newReleaser(opts.DB, opts.River.Schema(), opts.Logger)
	}
	return c
}

// Start launches the loop and returns at once. It runs until Stop; a
// second Start is refused with startstop.ErrStarted.
func (c *Claimer) Start(ctx context.Context) error {
	runCtx, err := c.base.Begin(ctx)
	if err != nil {
		return fmt.Errorf("start claimer: %w", err)
	}
	c.base.Go(func() { c.loop(runCtx) })
	if c.release != nil {
		c.base.Go(func() { c.release.loop(runCtx) })
	}
	return nil
}

// Stop ends the loop and waits for it; a claim in flight rolls back or
// commits whole.
func (c *Claimer) Stop() { c.base.Stop() }

// SetPaused stops (true) or resumes (false) claiming without stopping the
// loop: a draining node claims nothing new.
func (c *Claimer) SetPaused(p bool) {
	c.paused.Store(p)
	c.Notify()
}

// Paused reports whether claiming is paused.
func (c *Claimer) Paused() bool { return c.paused.Load() }

// TasksChannel is the NOTIFY channel on which a task's insert or update
// that makes it due sooner rings every replica at commit (a trigger,
// migrations/00013): wire it to Notify.
const TasksChannel = "switchboard_tasks"

// Notify wakes the loop early: a task was created or its schedule changed.
func (c *Claimer) Notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Look has the loop look at once, without claiming, and tell Outlook what
// it found (one statement).
func (c *Claimer) Look() {
	select {
	case c.look <- struct{}{}:
	default:
	}
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

func (c *Claimer) loop(ctx context.Context) {
	wait, claim := rand.N(c.opts.StartJitter), true
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.wake:
			t.Stop()
			claim = true
		case <-c.look:
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
// and then the question. A round woken for a due tick, or by Notify,
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
		return c.opts.MaxSleep, true
	}
	if full && !c.drain(ctx) {
		return c.opts.MaxSleep, true
	}
	return c.sleepUntil(c.untilNext(ctx))
}

// untilNext reads the backlog into the metrics and returns how long until
// the earliest due tick (0 or less: due now) and until the earliest run
// job that becomes fetchable later (see dueStats); ok is false when they
// could not be read. That job's time, when the loop would sleep past it,
// is handed to the releaser: the producers are notified at it.
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
	if c.opts.Outlook != nil {
		c.ahead = c.opts.Outlook(Outlook{Claim: next, Job: job, Available: available})
	}
	if c.release == nil {
		return next, NoWork, true
	}
	if job <= c.idlePoll() {
		c.release.add([]time.Time{jobAt})
	}
	return next, job, true
}

// sleepUntil turns the time until the next tick and the next job release
// into the loop's sleep and whether to claim when it ends. A release
// (registered by untilNext) wakes it just after, without a claim: the
// question then finds the release after it.
// Outlook asked to be told again ahead of the work: the loop looks (no
// claim) that long before the tick or the job.
func (c *Claimer) sleepUntil(next, job time.Duration, ok bool) (time.Duration, bool) {
	wait, claim := c.sleepForTick(next, ok)
	if !ok {
		return wait, claim
	}
	if job > 0 && job < wait-time.Millisecond { // (job may be NoWork)
		wait, claim = job+time.Millisecond, false
	}
	if a := c.ahead; a > 0 {
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
		return c.opts.MaxSleep, true
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
	if c.opts.Listening != nil && c.opts.Listening() {
		return c.opts.IdlePoll
	}
	return c.opts.MaxSleep
}

// claimBatch runs one claim; full: it filled its batch (more may be due).
// Errors are logged here.
func (c *Claimer) claimBatch(ctx context.Context) (full bool, err error) {
	n, err := c.ClaimOnce(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.opts.Logger.Error("claim due tasks", "error", err)
		}
		return false, err
	}
	return n >= c.opts.BatchSize && ctx.Err() == nil && !c.Paused(), nil
}

// drain claims a backlog with Parallel transactions at once, each until
// one claim comes back short of a full batch. false: a claim failed.
func (c *Claimer) drain(ctx context.Context) bool {
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range c.opts.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				full, err := c.claimBatch(ctx)
				if err != nil {
					failed.Store(true)
				}
				if !full {
					return
				}
			}
		}()
	}
	wg.Wait()
	return !failed.Load()
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

// claimedTask is a locked due task and the run its tick gets.
type claimedTask struct {
	id, owner    string
	overlap      string
	maxAttempts  int
	scheduledFor time.Time
	nextRunAt    *time.Time
	skipped      int
	ahead        bool // claimed before its tick (Lead)
}

// ClaimOnce runs one claim transaction: lock up to BatchSize due tasks
// (skipping rows other claimers hold), advance each next_run_at, insert each
// tick's run (unless overlap skips it) and its River job, commit. Any error
// rolls everything back: the ticks stay due for the next claim. It returns
// how many tasks it claimed.
func (c *Claimer) ClaimOnce(ctx context.Context) (int, error) {
	tx, err := c.opts.DB.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("claim: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	claimed, err := c.lockDue(ctx, tx)
	if err != nil || len(claimed) == 0 {
		return 0, err
	}
	cancelled, err := c.cancelOthers(ctx, tx, claimed)
	if err != nil {
		return 0, err
	}
	runs, err := c.insertRuns(ctx, tx, claimed)
	if err != nil {
		return 0, err
	}
	if err := c.enqueue(ctx, tx, claimed, runs); err != nil {
		return 0, err
	}
	if c.beforeCommit != nil {
		if err := c.beforeCommit(ctx, tx); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("claim: commit: %w", err)
	}
	c.released(claimed)
	c.recordClaim(ctx, claimed, runs)
	c.announce(ctx, claimed, cancelled)
	return len(claimed), nil
}

// cancelOthers cancels the active runs of claimed cancel_other tasks, in the
// claim transaction: the tick's run replaces them.
func (c *Claimer) cancelOthers(ctx context.Context, tx pgx.Tx, claimed []claimedTask) ([]Run, error) {
	var ids []string
	for _, ct := range claimed {
		if ct.overlap == OverlapCancelOther {
			ids = append(ids, ct.id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	runs, err := cancelActiveRuns(ctx, tx, c.opts.River, ids)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return runs, nil
}

func (c *Claimer) lockDue(ctx context.Context, tx pgx.Tx) ([]claimedTask, error) {
	rows, err := tx.Query(ctx, `
		SELECT id::text, owner_id::text, schedule, timezone, overlap, max_attempts, next_run_at, now()
		FROM tasks
		-- why: a tick not yet due is claimed only for overlap allow, whose
		-- run does not depend on what else runs at its tick (see Lead).
		WHERE active AND next_run_at <= now() + $2::interval AND schedule IS NOT NULL
		  AND (next_run_at <= now() OR overlap = 'allow')
		ORDER BY next_run_at
		LIMIT $1
		FOR UPDATE SKIP LOCKED`, c.opts.BatchSize, c.lead())
	if err != nil {
		return nil, fmt.Errorf("claim: lock due tasks: %w", err)
	}
	var out []claimedTask
	var spec, tz string
	var due, now time.Time
	var ct claimedTask
	_, err = pgx.ForEachRow(rows, []any{&ct.id, &ct.owner, &spec, &tz, &ct.overlap, &ct.maxAttempts, &due, &now}, func() error {
		s, err := c.schedule(spec, tz)
		if err != nil {
			// Stored schedules were validated; a zone dropped from the
			// tz database is the one way here. Stop the task, loudly.
			c.opts.Logger.Error("task schedule no longer parses; deactivating", "task_id", ct.id, "error", err)
			ct.nextRunAt, ct.scheduledFor, ct.skipped = nil, due, 0
		} else {
			ct.scheduledFor, ct.nextRunAt, ct.skipped = advance(s, due, now, c.opts.CatchUp)
		}
		ct.ahead = due.After(now)
		out = append(out, ct)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim: lock due tasks: %w", err)
	}
	return out, nil
}

// maxFold bounds how many missed ticks advance counts one by one.
const maxFold = 1_000_000

// advance decides a claimed task's run and next tick. A tick at most catchUp
// late runs on its own; the next one stays due if it is too (it is claimed
// next round). An older tick was missed while no claimer ran: it gets the
// one run, every later tick up to now is counted as skipped, and next_run_at
// moves past now.
func advance(s *Schedule, due, now time.Time, catchUp time.Duration) (scheduledFor time.Time, next *time.Time, skipped int) {
	n := s.Next(due)
	if now.Sub(due) > catchUp {
		for !n.IsZero() && !n.After(now) {
			skipped++
			if skipped >= maxFold {
				n = s.Next(now)
				break
			}
			n = s.Next(n)
		}
	}
	if n.IsZero() {
		return due, nil, skipped
	}
	return due, &n, skipped
}

func (c *Claimer) schedule(spec, tz string) (*Schedule, error) {
	key := spec + "\x00" + tz
	c.schedMu.Lock()
	defer c.schedMu.Unlock()
	if s, ok := c.schedules[key]; ok {
		return s, nil
	}
	s, err := ParseSchedule(spec, tz)
	if err != nil {
		return nil, err
	}
	if len(c.schedules) > 10_000 {
		c.schedules = map[string]*Schedule{}
	}
	c.schedules[key] = s
	return s, nil
}

// insertRuns inserts the claimed ticks' runs (unless overlap skips them)
// and advances every claimed task. The tasks are locked by this
// transaction, so the overlap check (no run queued or running) cannot race
// a concurrent insert.
//
// Two statements, not one with the advance as a CTE joined to the
// insert's RETURNING: a CTE has no index, and the generic plan pgx's
// prepared statement gets after five runs estimates ten input rows, so it
// joined the two by nested loop, batch size squared (a batch of 500 took
// 420 ms instead of 34; BenchmarkClaimRate). Each statement here reaches
// the tasks by primary key: linear in the batch.
func (c *Claimer) insertRuns(ctx context.Context, tx pgx.Tx, claimed []claimedTask) ([]Run, error) {
	n := len(claimed)
	ids, ticks, nexts := make([]string, n), make([]time.Time, n), make([]*time.Time, n)
	skipped := make([]int32, n)
	for i, ct := range claimed {
		ids[i], ticks[i], nexts[i], skipped[i] = ct.id, ct.scheduledFor, ct.nextRunAt, int32(ct.skipped)
	}
	runs, err := insertTickRuns(ctx, tx, ids, ticks, skipped)
	if err != nil {
		return nil, err
	}
	inserted := make(map[string]bool, len(runs))
	for _, r := range runs {
		inserted[r.TaskID] = true
	}
	ran := make([]bool, n)
	for i, id := range ids {
		ran[i] = inserted[id]
	}
	// A tick that got no run (overlap skipped it, or its run exists)
	// counts as skipped.
	_, err = tx.Exec(ctx, `
		UPDATE tasks t SET
			next_run_at = i.next_run_at,
			active = t.active AND i.next_run_at IS NOT NULL,
			skipped_ticks = t.skipped_ticks + i.skipped + (NOT i.ran)::int,
			run_count = t.run_count + i.ran::int,
			last_run_at = CASE WHEN i.ran THEN now() ELSE t.last_run_at END
		FROM unnest($1::uuid[], $2::timestamptz[], $3::int[], $4::bool[]) AS i(task_id, next_run_at, skipped, ran)
		WHERE t.id = i.task_id`, ids, nexts, skipped, ran)
	if err != nil {
		return nil, fmt.Errorf("claim: advance tasks: %w", err)
	}
	return runs, nil
}

func (c *Claimer) enqueue(ctx context.Context, tx pgx.Tx, claimed []claimedTask, runs []Run) error {
	if len(runs) == 0 {
		return nil
	}
	byTask := make(map[string]claimedTask, len(claimed))
	for _, ct := range claimed {
		byTask[ct.id] = ct
	}
	params := make([]river.InsertManyParams, len(runs))
	var ahead bool
	for i, r := range runs {
		ct := byTask[r.TaskID]
		opts := runInsertOpts(ct.maxAttempts)
		if ct.ahead {
			// Not fetchable before its tick; ReleaseAtTick keeps it
			// available rather than scheduled.
			opts.ScheduledAt, ahead = ct.scheduledFor, true
		}
		params[i] = river.InsertManyParams{Args: RunArgs{RunID: r.ID, TaskID: r.TaskID}, InsertOpts: opts}
	}
	var mark *atTimeInsert
	if ahead {
		ctx, mark = insertAtTime(ctx)
	}
	if _, err := c.opts.River.InsertManyFastTx(ctx, tx, params); err != nil {
		return fmt.Errorf("claim: enqueue runs: %w", err)
	}
	if mark != nil && !mark.kept {
		// Its jobs would wait for River's scheduler (up to 5 s): roll
		// back, and claim ticks once due from now on.
		c.noLead.Store(true)
		return errors.New("claim: the River client has no jobs.ReleaseAtTick middleware; claiming ticks once due (no lead)")
	}
	return nil
}

// lead is how far ahead ticks are claimed now.
func (c *Claimer) lead() time.Duration {
	if c.noLead.Load() {
		return 0
	}
	return c.opts.Lead
}

// released notes the ticks claimed ahead (committed) for the releaser.
func (c *Claimer) released(claimed []claimedTask) {
	if c.release == nil {
		return
	}
	var ticks []time.Time
	for _, ct := range claimed {
		if ct.ahead {
			ticks = append(ticks, ct.scheduledFor)
		}
	}
	c.release.add(ticks)
}

// recordClaim counts what was committed and announces the queued runs.
func (c *Claimer) recordClaim(ctx context.Context, claimed []claimedTask, runs []Run) {
	m := c.opts.Metrics
	m.claimed(len(claimed))
	missed := 0
	for _, ct := range claimed {
		missed += ct.skipped
	}
	m.skippedTicks("missed", missed)
	m.skippedTicks("overlap", len(claimed)-len(runs))
	c.announce(ctx, claimed, runs)
}

// announce announces the runs of claimed tasks to their owners.
func (c *Claimer) announce(ctx context.Context, claimed []claimedTask, runs []Run) {
	if len(runs) == 0 {
		return
	}
	owners := make(map[string]string, len(claimed))
	for _, ct := range claimed {
		owners[ct.id] = ct.owner
	}
	owned := make([]OwnedRun, len(runs))
	for i, r := range runs {
		owned[i] = OwnedRun{Run: r, OwnerID: owners[r.TaskID]}
	}
	c.opts.Announcer.Announce(ctx, owned...)
}
