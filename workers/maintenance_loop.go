package workers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/jobs"
)

// MaintenanceTimeout bounds one run of a maintenance task.
const MaintenanceTimeout = time.Minute

// MaintenanceLoopOptions configure a maintenance loop; zero values mean
// defaults.
type MaintenanceLoopOptions struct {
	DB db.DB
	// Tasks are the tasks this replica runs (Maintenance(opts)). Rows of
	// other tasks in maintenance_schedule (an older or newer version's)
	// are left alone.
	Tasks  []MaintenanceTask
	Logger *slog.Logger
	// Registry gets switchboard_maintenance_runs_total; nil registers it
	// on a private registry.
	Registry prometheus.Registerer
	// Timeout bounds one run of a task; default MaintenanceTimeout.
	Timeout time.Duration
	// MinSleep is the shortest sleep after a claim that left a due row to
	// another replica (it holds the row's lock: it is claiming it) or that
	// failed; default 1s. A task's Every is never shorter.
	MinSleep time.Duration
	// Slack: a row due within it (at most half its Every) is claimed with
	// the due ones, so tasks a few milliseconds apart share one statement
	// per period and stay together; default 1s.
	Slack time.Duration
}

// MaintenanceLoop runs the periodic housekeeping on a worker replica.
// Every worker replica runs one; there is no leader: like the cron claim
// loop, FOR UPDATE SKIP LOCKED hands each period of a task to exactly one
// replica, which moves the task's next_at one period on in the same
// statement. An idle replica spends one statement per wake, and it wakes
// only when the earliest period it knows of falls due.
//
// A task that fails runs again next period; a replica stopped or killed
// while a task runs loses that period's run (the tasks are idempotent:
// the next period does the work).
type MaintenanceLoop struct {
	opts  MaintenanceLoopOptions
	tasks map[string]MaintenanceTask
	names []string // the tasks in declaration order
	runs  *prometheus.CounterVec

	paused atomic.Bool
	wake   chan struct{}
	done   chan string // a task's run ended (the loop owns running)
	base   startstop.Base

	// onClaim, when set (tests), sees every claim: the task, the next_at
	// it claimed (its period) and the one it set.
	onClaim func(task string, period, next time.Time)
}

// NewMaintenanceLoop builds the loop; Start runs it. A task declared
// twice runs under its first declaration.
func NewMaintenanceLoop(opts MaintenanceLoopOptions) *MaintenanceLoop {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)).With("component", "maintenance")
	opts.Timeout = cmp.Or(opts.Timeout, MaintenanceTimeout)
	opts.MinSleep = cmp.Or(opts.MinSleep, time.Second)
	opts.Slack = cmp.Or(opts.Slack, time.Second)
	l := &MaintenanceLoop{opts: opts, tasks: map[string]MaintenanceTask{}, wake: make(chan struct{}, 1)}
	for _, t := range opts.Tasks {
		if _, dup := l.tasks[t.Name]; !dup {
			t.Every = max(t.Every, opts.MinSleep)
			l.tasks[t.Name], l.names = t, append(l.names, t.Name)
		}
	}
	l.done = make(chan string, len(l.names))
	l.runs = newMaintenanceRuns(cmp.Or[prometheus.Registerer](opts.Registry, prometheus.NewRegistry()), l.names)
	return l
}

func newMaintenanceRuns(reg prometheus.Registerer, names []string) *prometheus.CounterVec {
	runs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_maintenance_runs_total",
		Help: "Maintenance task runs on this node by task and result (succeeded, failed).",
	}, []string{"task", "result"})
	reg.MustRegister(runs)
	for _, n := range names { // every series from the start, at zero
		runs.WithLabelValues(n, "succeeded")
		runs.WithLabelValues(n, "failed")
	}
	return runs
}

// Start launches the loop and returns at once; its first round registers
// the tasks' rows. A second Start is refused with startstop.ErrStarted.
func (l *MaintenanceLoop) Start(ctx context.Context) error {
	runCtx, err := l.base.Begin(ctx)
	if err != nil {
		return fmt.Errorf("start maintenance loop: %w", err)
	}
	l.base.Go(func() { l.loop(runCtx) })
	return nil
}

// Stop ends the loop, cancels the tasks running and waits for them.
func (l *MaintenanceLoop) Stop() { l.base.Stop() }

// SetPaused stops (true) or resumes (false) claiming: a draining node
// takes no new periods; the runs under way finish.
func (l *MaintenanceLoop) SetPaused(p bool) {
	l.paused.Store(p)
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// loopState is what the loop knows between rounds.
type loopState struct {
	registered bool
	running    map[string]bool
	next       map[string]time.Time // each task's next_at, on this clock
}

func (l *MaintenanceLoop) loop(ctx context.Context) {
	st := &loopState{running: map[string]bool{}, next: map[string]time.Time{}}
	wait := time.Duration(0)
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-l.wake:
			wait = l.round(ctx, st)
		case name := <-l.done:
			// No statement: the next wake is known unless the period of
			// the task that just ended has passed meanwhile.
			delete(st.running, name)
			if wait = l.untilNext(st); wait <= 0 {
				wait = l.round(ctx, st)
			}
		case <-t.C:
			wait = l.round(ctx, st)
		}
		t.Stop()
	}
}

// idle is how long the loop sleeps with nothing to claim (paused, or every
// task running): until a run ends or SetPaused wakes it.
const idle = 24 * time.Hour

// round registers the tasks (once), claims the due periods of the tasks not
// running here, starts their runs and returns how long to sleep.
func (l *MaintenanceLoop) round(ctx context.Context, st *loopState) time.Duration {
	if l.paused.Load() || len(l.names) == 0 {
		return idle
	}
	if !st.registered {
		if err := l.register(ctx); err != nil {
			l.warn(ctx, "register maintenance tasks", err)
			return l.opts.MinSleep
		}
		st.registered = true
	}
	var names []string
	for _, n := range l.names {
		if !st.running[n] {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return idle
	}
	rows, err := l.claim(ctx, names)
	if err != nil {
		l.warn(ctx, "claim maintenance tasks", err)
		return l.opts.MinSleep
	}
	l.apply(ctx, st, rows)
	if len(rows) < len(names) { // a row went missing: register it again
		st.registered = false
		return l.opts.MinSleep
	}
	if wait := l.untilNext(st); wait > 0 {
		return wait + time.Millisecond
	}
	return l.opts.MinSleep // due but locked: another replica is claiming it
}

// apply records what a claim returned and starts the claimed runs.
func (l *MaintenanceLoop) apply(ctx context.Context, st *loopState, rows []scheduleRow) {
	now := time.Now()
	for _, r := range rows {
		st.next[r.name] = now.Add(r.untilNext)
		if !r.claimed {
			continue
		}
		if l.onClaim != nil {
			l.onClaim(r.name, r.period, r.nextAt)
		}
		st.running[r.name] = true
		t := l.tasks[r.name]
		l.base.Go(func() {
			defer func() { l.done <- t.Name }()
			l.run(ctx, t)
		})
	}
}

// untilNext is the time until the earliest next_at of a task not running
// here (idle when every task runs).
func (l *MaintenanceLoop) untilNext(st *loopState) time.Duration {
	wait := idle
	for n, at := range st.next {
		if !st.running[n] {
			wait = min(wait, time.Until(at))
		}
	}
	return wait
}

// run runs one period of t within Timeout and logs and counts the result.
// A panic is a failure, as it was under River, not a crash of the node.
func (l *MaintenanceLoop) run(ctx context.Context, t MaintenanceTask) {
	rctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	start := time.Now()
	n, err := runRecovered(rctx, t)
	ms := time.Since(start).Milliseconds()
	switch {
	case err == nil:
		l.runs.WithLabelValues(t.Name, "succeeded").Inc()
		level := slog.LevelInfo
		if n == 0 { // a pass that found nothing is routine, every period
			level = slog.LevelDebug
		}
		l.opts.Logger.Log(ctx, level, "maintenance done", "task", t.Name, "affected", n, "duration_ms", ms)
	case ctx.Err() != nil: // stopping: the period is lost, not failed
	default:
		l.runs.WithLabelValues(t.Name, "failed").Inc()
		l.opts.Logger.ErrorContext(ctx, "maintenance failed", "task", t.Name, "error", err, "duration_ms", ms)
	}
}

func runRecovered(ctx context.Context, t MaintenanceTask) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return t.Run(ctx)
}

// warn logs a failed statement unless the loop is stopping.
func (l *MaintenanceLoop) warn(ctx context.Context, what string, err error) {
	if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		l.opts.Logger.WarnContext(ctx, what, "error", err)
	}
}

// everyMicros lists the Every of names, in microseconds, for the queries.
func (l *MaintenanceLoop) everyMicros(names []string) []int64 {
	us := make([]int64, len(names))
	for i, n := range names {
		us[i] = l.tasks[n].Every.Microseconds()
	}
	return us
}

// register inserts the rows of this replica's tasks that do not exist yet,
// their first period one Every from now. No jitter: the row is shared, so
// replicas need no spreading, and tasks of one Every registered together
// keep one next_at, claimed by one statement per period. An existing row
// is left as it is: a restart or a deploy does not move the schedule or
// run everything at once. It also deletes River's periodic maintenance
// jobs that a replica of an older version inserted after migration 00014
// (a rolling deploy; jobs.LegacyMaintenanceJobsCTE).
func (l *MaintenanceLoop) register(ctx context.Context) error {
	_, err := l.opts.DB.Exec(ctx, `
		WITH `+jobs.LegacyMaintenanceJobsCTE+`
		INSERT INTO maintenance_schedule (name, next_at)
		SELECT name, now() + every_us * interval '1 microsecond'
		FROM unnest($1::text[], $2::bigint[]) AS t(name, every_us)
		ON CONFLICT (name) DO NOTHING`, l.names, l.everyMicros(l.names))
	if err != nil {
		return fmt.Errorf("register maintenance tasks: %w", err)
	}
	return nil
}

// scheduleRow is one task's row as a claim returned it.
type scheduleRow struct {
	name      string
	claimed   bool
	period    time.Time     // next_at as the claim found it
	nextAt    time.Time     // next_at after the claim
	untilNext time.Duration // nextAt - the database's now()
}

// claim claims, in one statement, the rows of names that are due (or due
// within Slack), moves each one's next_at to now() + its Every, and
// returns every row of names: claimed or not, with its next_at.
func (l *MaintenanceLoop) claim(ctx context.Context, names []string) ([]scheduleRow, error) {
	rows, err := l.opts.DB.Query(ctx, `
		WITH ours AS (
			SELECT name, every_us * interval '1 microsecond' AS every
			FROM unnest($1::text[], $2::bigint[]) AS t(name, every_us)
		), due AS (
			-- why: SKIP LOCKED hands a due row to one replica; the others
			-- skip it (it is being claimed) instead of waiting for it.
			SELECT s.name, s.next_at, o.every
			FROM maintenance_schedule s JOIN ours o USING (name)
			WHERE s.next_at <= now() + LEAST($3::bigint * interval '1 microsecond', o.every / 2)
			FOR UPDATE OF s SKIP LOCKED
		), moved AS (
			UPDATE maintenance_schedule s SET next_at = now() + d.every
			FROM due d WHERE s.name = d.name
			RETURNING s.name, d.next_at AS period, s.next_at
		)
		-- why: the rest of the statement does not see moved's changes (one
		-- snapshot): s is each row as it was, so a claimed row's new next_at
		-- comes from moved, and a row skipped as locked shows its old one.
		SELECT s.name, m.name IS NOT NULL, COALESCE(m.period, s.next_at), COALESCE(m.next_at, s.next_at),
		       EXTRACT(EPOCH FROM COALESCE(m.next_at, s.next_at) - now())::float8
		FROM maintenance_schedule s JOIN ours o USING (name) LEFT JOIN moved m USING (name)`,
		names, l.everyMicros(names), l.opts.Slack.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("claim maintenance tasks: %w", err)
	}
	defer rows.Close()
	var out []scheduleRow
	for rows.Next() {
		var r scheduleRow
		var secs float64
		if err := rows.Scan(&r.name, &r.claimed, &r.period, &r.nextAt, &secs); err != nil {
			return nil, fmt.Errorf("claim maintenance tasks: %w", err)
		}
		r.untilNext = time.Duration(secs * float64(time.Second))
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim maintenance tasks: %w", err)
	}
	return out, nil
}
