package workers

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/startstoptest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// claimLog records every claim of every loop on one database.
type claimLog struct {
	mu     sync.Mutex
	claims map[string][]periodClaim
}

type periodClaim struct {
	loop           int
	period, nextAt time.Time
}

func (c *claimLog) hook(loop int) func(string, time.Time, time.Time) {
	return func(task string, period, next time.Time) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.claims == nil {
			c.claims = map[string][]periodClaim{}
		}
		c.claims[task] = append(c.claims[task], periodClaim{loop: loop, period: period, nextAt: next})
	}
}

// count is how many periods of task were claimed.
func (c *claimLog) count(task string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.claims[task])
}

// checkChain fails unless task's claims, ordered by period, form one
// chain: each claim's period is the next_at the one before set. A period
// claimed twice shows as two claims of one row version; a skipped one as
// a gap.
func (c *claimLog) checkChain(t *testing.T, task string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := slices.Clone(c.claims[task])
	slices.SortFunc(cl, func(a, b periodClaim) int { return a.period.Compare(b.period) })
	perLoop := map[int]int{}
	for _, c := range cl {
		perLoop[c.loop]++
	}
	t.Logf("%s: %d periods claimed, by loop: %v", task, len(cl), perLoop)
	for i := 1; i < len(cl); i++ {
		if cl[i].period.Equal(cl[i-1].period) {
			t.Fatalf("%s: period %s claimed twice (loops %d and %d)", task, cl[i].period, cl[i-1].loop, cl[i].loop)
		}
		if !cl[i].period.Equal(cl[i-1].nextAt) {
			t.Fatalf("%s: claim %d took period %s, the one before set %s", task, i, cl[i].period, cl[i-1].nextAt)
		}
	}
}

// counted is a task that counts its runs and returns err.
func counted(name string, every time.Duration, n *atomic.Int64, err error) MaintenanceTask {
	return MaintenanceTask{Name: name, Every: every, Run: func(context.Context) (int64, error) {
		n.Add(1)
		return 1, err
	}}
}

func newLoop(t *testing.T, q db.DB, opts MaintenanceLoopOptions) *MaintenanceLoop {
	t.Helper()
	opts.DB, opts.Logger = q, dbtest.Logger(t)
	l := NewMaintenanceLoop(opts)
	t.Cleanup(l.Stop)
	return l
}

func startLoop(t *testing.T, l *MaintenanceLoop) {
	t.Helper()
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func nextAt(t *testing.T, pool *pgxpool.Pool, name string) time.Time {
	t.Helper()
	var at time.Time
	if err := pool.QueryRow(context.Background(), `SELECT next_at FROM maintenance_schedule WHERE name = $1`, name).Scan(&at); err != nil {
		t.Fatalf("next_at of %s: %v", name, err)
	}
	return at
}

func TestMaintenanceLoopLifecycle(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	var n atomic.Int64
	startstoptest.Stress(t, func(t *testing.T) startstop.Service {
		return newLoop(t, pool, MaintenanceLoopOptions{Tasks: []MaintenanceTask{counted("lifecycle", time.Hour, &n, nil)}})
	})
}

func TestMaintenanceLoopReplicas(t *testing.T) {
	t.Parallel()
	t.Run("EachPeriodRunsOnceAcrossThreeLoops", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		var log claimLog
		names := []string{"fast_a", "fast_b", "slower"}
		var runs [3]atomic.Int64
		var loops []*MaintenanceLoop
		for i := range 3 {
			tasks := []MaintenanceTask{
				counted(names[0], 200*time.Millisecond, &runs[0], nil),
				counted(names[1], 200*time.Millisecond, &runs[1], nil),
				counted(names[2], 300*time.Millisecond, &runs[2], nil),
			}
			// A short MinSleep: a loop that found a row locked looks again
			// soon, while its claimer may still hold it.
			l := newLoop(t, pool, MaintenanceLoopOptions{Tasks: tasks, MinSleep: 5 * time.Millisecond})
			l.onClaim = log.hook(i)
			loops = append(loops, l)
		}
		for _, l := range loops {
			startLoop(t, l)
		}
		testwait.For(t, 60*time.Second, "eight periods of every task", func() bool {
			return log.count(names[0]) >= 8 && log.count(names[1]) >= 8 && log.count(names[2]) >= 8
		})
		for _, l := range loops {
			l.Stop()
		}
		for i, name := range names {
			log.checkChain(t, name)
			// A loop stopped between a claim and its run loses that run.
			if c, r := int64(log.count(name)), runs[i].Load(); r > c || r < c-int64(len(loops)) {
				t.Fatalf("%s: %d claims, %d runs", name, c, r)
			}
		}
	})
	t.Run("OneStatementPerPeriodForTasksOfOneEvery", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		counting := &dbtest.CountingDB{DB: pool}
		var log claimLog
		var n atomic.Int64
		l := newLoop(t, counting, MaintenanceLoopOptions{Tasks: []MaintenanceTask{
			counted("one", 300*time.Millisecond, &n, nil), counted("two", 300*time.Millisecond, &n, nil),
			counted("three", 300*time.Millisecond, &n, nil),
		}, MinSleep: 5 * time.Millisecond})
		l.onClaim = log.hook(0)
		startLoop(t, l)
		testwait.For(t, 60*time.Second, "four periods", func() bool { return log.count("one") >= 4 })
		l.Stop()
		// The registration, the first claim (nothing due yet), then one
		// claim per period for all three.
		if got, periods := counting.Count(), int64(log.count("one")); got > periods+2 {
			t.Fatalf("%d statements for %d periods of three tasks", got, periods)
		}
		if log.count("two") != log.count("one") || log.count("three") != log.count("one") {
			t.Fatalf("claims: %d, %d, %d", log.count("one"), log.count("two"), log.count("three"))
		}
	})
}

func TestMaintenanceLoopFailures(t *testing.T) {
	t.Parallel()
	t.Run("AFailingTaskRunsAgainAndTheOthersGoOn", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		var fails, works, panics atomic.Int64
		l := newLoop(t, pool, MaintenanceLoopOptions{MinSleep: 5 * time.Millisecond, Tasks: []MaintenanceTask{
			counted("fails", 100*time.Millisecond, &fails, errors.New("boom")),
			{Name: "panics", Every: 100 * time.Millisecond, Run: func(context.Context) (int64, error) {
				panics.Add(1)
				panic("boom")
			}},
			counted("works", 100*time.Millisecond, &works, nil),
		}})
		startLoop(t, l)
		testwait.For(t, 60*time.Second, "three periods of each task", func() bool {
			return fails.Load() >= 3 && panics.Load() >= 3 && works.Load() >= 3
		})
		l.Stop()
		for task, want := range map[string]int64{"fails": fails.Load(), "panics": panics.Load()} {
			if got := testutil.ToFloat64(l.runs.WithLabelValues(task, "failed")); int64(got) != want {
				t.Fatalf("%s: %v failed runs counted, %d runs", task, got, want)
			}
		}
		if got := testutil.ToFloat64(l.runs.WithLabelValues("works", "succeeded")); int64(got) != works.Load() {
			t.Fatalf("works: %v succeeded runs counted, %d runs", got, works.Load())
		}
	})
	t.Run("ARunIsBoundedByTimeout", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		ended := make(chan error, 10)
		l := newLoop(t, pool, MaintenanceLoopOptions{MinSleep: 5 * time.Millisecond, Timeout: 50 * time.Millisecond,
			Tasks: []MaintenanceTask{{Name: "hangs", Every: 20 * time.Millisecond, Run: func(ctx context.Context) (int64, error) {
				<-ctx.Done()
				select {
				case ended <- ctx.Err():
				default:
				}
				return 0, ctx.Err()
			}}}})
		startLoop(t, l)
		if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the run ended with %v, want its deadline", err)
		}
		testwait.For(t, 30*time.Second, "the timeout counted as a failure", func() bool {
			return testutil.ToFloat64(l.runs.WithLabelValues("hangs", "failed")) >= 1
		})
	})
	t.Run("StopMidTaskCancelsIt", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		started, ended := make(chan struct{}), make(chan error, 1)
		l := newLoop(t, pool, MaintenanceLoopOptions{MinSleep: 5 * time.Millisecond, Tasks: []MaintenanceTask{
			{Name: "long", Every: 10 * time.Millisecond, Run: func(ctx context.Context) (int64, error) {
				close(started)
				<-ctx.Done()
				ended <- ctx.Err()
				return 0, ctx.Err()
			}}}})
		startLoop(t, l)
		<-started
		l.Stop() // returns only once the run has: it waits for it
		select {
		case err := <-ended:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("the run ended with %v, want cancelled (not its minute's deadline)", err)
			}
		default:
			t.Fatal("Stop returned before the running task did")
		}
		if got := testutil.ToFloat64(l.runs.WithLabelValues("long", "failed")); got != 0 {
			t.Fatalf("a run cancelled by Stop counted as %v failures", got)
		}
	})
}

func TestMaintenanceLoopSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	newState := func() *loopState { return &loopState{running: map[string]bool{}, next: map[string]time.Time{}} }
	t.Run("RegisterKeepsExistingRowsAndDeletesRiverJobs", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		kept := time.Now().Add(5 * time.Hour).Truncate(time.Microsecond)
		if _, err := pool.Exec(ctx, `INSERT INTO maintenance_schedule VALUES ('kept', $1)`, kept); err != nil {
			t.Fatal(err)
		}
		_, err := pool.Exec(ctx, `INSERT INTO river_job (kind, args, max_attempts, queue, state)
			VALUES ('maintenance', '{"task":"prune_runs"}', 3, 'maintenance', 'available')`)
		if err != nil {
			t.Fatal(err)
		}
		var n atomic.Int64
		l := newLoop(t, pool, MaintenanceLoopOptions{Tasks: []MaintenanceTask{counted("kept", time.Minute, &n, nil), counted("new", time.Hour, &n, nil)}})
		before := time.Now()
		if wait := l.round(ctx, newState()); wait < 59*time.Minute {
			t.Fatalf("first round sleeps %s, want until the new task's first period, an hour on", wait)
		}
		if at := nextAt(t, pool, "kept"); !at.Equal(kept) {
			t.Fatalf("existing row moved from %s to %s", kept, at)
		}
		if at := nextAt(t, pool, "new"); at.Before(before.Add(time.Hour - time.Second)) {
			t.Fatalf("new row's first period at %s, want an hour after registering", at)
		}
		var jobs int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'maintenance'`).Scan(&jobs); err != nil || jobs != 0 {
			t.Fatalf("%d River maintenance jobs left (%v)", jobs, err)
		}
	})
	t.Run("UnknownRowsAreLeftAlone", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		old := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
		if _, err := pool.Exec(ctx, `INSERT INTO maintenance_schedule VALUES ('other_version', $1), ('mine', $1)`, old); err != nil {
			t.Fatal(err)
		}
		var n atomic.Int64
		l := newLoop(t, pool, MaintenanceLoopOptions{Tasks: []MaintenanceTask{counted("mine", time.Hour, &n, nil)}})
		var log claimLog
		l.onClaim = log.hook(0)
		// The overdue row of another version neither runs nor shortens
		// the sleep: the loop sleeps until its own task's next period.
		if wait := l.round(ctx, newState()); wait < 59*time.Minute {
			t.Fatalf("round sleeps %s, want about an hour", wait)
		}
		if log.count("mine") != 1 || log.count("other_version") != 0 {
			t.Fatalf("claims: %v", log.claims)
		}
		if at := nextAt(t, pool, "other_version"); !at.Equal(old) {
			t.Fatalf("unknown row moved to %s", at)
		}
		testwait.For(t, 30*time.Second, "mine to run", func() bool { return n.Load() == 1 })
	})
	t.Run("ARowLockedByAnotherReplicaFloorsTheSleep", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		old := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
		if _, err := pool.Exec(ctx, `INSERT INTO maintenance_schedule VALUES ('locked', $1), ('free', now() + interval '1 hour')`, old); err != nil {
			t.Fatal(err)
		}
		tx, err := pool.Begin(ctx) // another replica's claim, under way
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `SELECT 1 FROM maintenance_schedule WHERE name = 'locked' FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
		var n atomic.Int64
		l := newLoop(t, pool, MaintenanceLoopOptions{MinSleep: 300 * time.Millisecond,
			Tasks: []MaintenanceTask{counted("locked", time.Minute, &n, nil), counted("free", time.Hour, &n, nil)}})
		st := newState()
		st.registered = true
		if wait := l.round(ctx, st); wait != 300*time.Millisecond {
			t.Fatalf("with the due row locked the loop sleeps %s, want MinSleep", wait)
		}
		if at := nextAt(t, pool, "locked"); !at.Equal(old) || len(st.running) != 0 {
			t.Fatalf("locked row claimed: next_at %s, running %v", at, st.running)
		}
		_ = tx.Rollback(ctx)
		if wait := l.round(ctx, st); wait < 59*time.Second || !st.running["locked"] {
			t.Fatalf("once unlocked: sleeps %s, running %v; want it claimed and a minute's sleep", wait, st.running)
		}
	})
	t.Run("AMissingRowIsRegisteredAgain", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		var n atomic.Int64
		l := newLoop(t, pool, MaintenanceLoopOptions{Tasks: []MaintenanceTask{counted("gone", time.Hour, &n, nil)}})
		st := newState()
		l.round(ctx, st)
		if _, err := pool.Exec(ctx, `DELETE FROM maintenance_schedule`); err != nil {
			t.Fatal(err)
		}
		l.round(ctx, st)
		l.round(ctx, st)
		nextAt(t, pool, "gone")
	})
}
