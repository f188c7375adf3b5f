package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// CatchUp is how late a tick may be claimed and still get its own run.
	// Ticks older than that were missed while no claimer ran: the oldest gets
	// one run, the rest are counted as skipped. Default 10s.
	CatchUp time.Duration
	// Pacing is when the loop claims and looks (pacing.go).
	Pacing Pacing
}

// Claimer is the claim loop of one worker replica. Every replica runs one;
// there is no leader: FOR UPDATE SKIP LOCKED hands each due task to exactly
// one of them per tick.
type Claimer struct {
	opts   ClaimerOptions
	paused atomic.Bool
	pace   *pacer // pacing.go
	base   startstop.Base

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
	opts.CatchUp = cmp.Or(opts.CatchUp, 10*time.Second)
	if opts.Announcer == nil {
		opts.Announcer = NewAnnouncer(AnnouncerOptions{Metrics: opts.Metrics})
	}
	c := &Claimer{opts: opts, schedules: map[string]*Schedule{}}
	c.pace = newPacer(opts)
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
	if n := c.pace.notifier; n != nil {
		c.base.Go(func() { n.loop(runCtx) })
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
	c.Wake()
}

// Paused reports whether claiming is paused.
func (c *Claimer) Paused() bool { return c.paused.Load() }

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

// claimedTask is a locked due task and the run its tick gets.
type claimedTask struct {
	id, project  string
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
	c.notifyAhead(claimed)
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
		SELECT id::text, project_id::text, schedule, timezone, overlap, max_attempts, next_run_at, now()
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
	_, err = pgx.ForEachRow(rows, []any{&ct.id, &ct.project, &spec, &tz, &ct.overlap, &ct.maxAttempts, &due, &now}, func() error {
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
		opts := runInsertOpts(ct.project, ct.maxAttempts, r.Priority)
		if ct.ahead {
			// Not fetchable before its tick; InsertAvailable keeps it
			// available rather than scheduled.
			opts.ScheduledAt, ahead = ct.scheduledFor, true
		}
		params[i] = river.InsertManyParams{Args: RunArgs{RunID: r.ID, TaskID: r.TaskID}, InsertOpts: opts}
	}
	var mark *availableInsert
	if ahead {
		ctx, mark = markInsertAvailable(ctx)
	}
	if _, err := c.opts.River.InsertManyFastTx(ctx, tx, params); err != nil {
		return fmt.Errorf("claim: enqueue runs: %w", err)
	}
	if mark != nil && !mark.kept {
		// Its jobs would wait for River's scheduler (up to 5 s): roll
		// back, and claim ticks once due from now on.
		c.leadOff()
		return errors.New("claim: the River client has no jobs.InsertAvailable middleware; claiming ticks once due (no lead)")
	}
	return nil
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

// announce announces the runs of claimed tasks to their projects.
func (c *Claimer) announce(ctx context.Context, claimed []claimedTask, runs []Run) {
	if len(runs) == 0 {
		return
	}
	projects := make(map[string]string, len(claimed))
	for _, ct := range claimed {
		projects[ct.id] = ct.project
	}
	owned := make([]OwnedRun, len(runs))
	for i, r := range runs {
		owned[i] = OwnedRun{Run: r, ProjectID: projects[r.TaskID]}
	}
	c.opts.Announcer.Announce(ctx, owned...)
}
