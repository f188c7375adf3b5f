package workers

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/jobs"
)

// TestClaimAheadStartsAtTick: with RiverConfig's client, a tick claimed
// ahead starts at its tick: not before (its job is not fetchable earlier),
// and not on River's next poll (an hour here): the claimer wakes the
// producers when the tick comes.
func TestClaimAheadStartsAtTick(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	client := startRiver(t, pool, Options{ClientID: uuid.NewString(), DB: pool, Publisher: noopPublisher{}}, time.Hour)
	b := &testBundle{pool: pool, river: client, owner: dbtest.User(t, pool, nil).ID}
	task := b.task(t, jobs.Action{Type: jobs.ActionPublish, Event: "tick"}, func(t *jobs.Task) { t.Overlap = jobs.OverlapAllow })
	tick := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
	if _, err := pool.Exec(ctx, `UPDATE tasks SET next_run_at = $2 WHERE id = $1`, task.ID, tick); err != nil {
		t.Fatal(err)
	}
	c := jobs.NewClaimer(jobs.ClaimerOptions{DB: pool, River: client, Logger: dbtest.Logger(t),
		Pacing: jobs.Pacing{Lead: jobs.MaxLead, StartJitter: time.Millisecond}})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	var created, started, scheduled time.Time
	testwait.For(t, 30*time.Second, "the run claimed ahead to start", func() bool {
		err := pool.QueryRow(ctx, `SELECT created_at, started_at, scheduled_for FROM task_runs WHERE task_id = $1 AND started_at IS NOT NULL`,
			task.ID).Scan(&created, &started, &scheduled)
		return err == nil
	})
	if !scheduled.Equal(tick) || !created.Before(tick) {
		t.Fatalf("run for %v created at %v; want the tick %v claimed ahead", scheduled, created, tick)
	}
	if started.Before(tick) {
		t.Fatalf("run started at %v, before its tick %v", started, tick)
	}
}

// fetchBundle is a worker replica's job queue whose River polls once an
// hour, and whose claim loop believes it hears every task change (its idle
// poll is an hour too): what starts a run on time here is a notification.
type fetchBundle struct {
	*testBundle
	queue *Coordinator
	// web inserts like a web-only replica: its own client, whose insert
	// notifications River's per-client limiter (FetchCooldown) does not
	// fold into the worker's claim notifications.
	web *river.Client[pgx.Tx]
	// notices are the worker's, rung by listen as the bus would.
	notices *Notices
}

func newFetchBundle(t *testing.T, backoff time.Duration) *fetchBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	notices, err := NewNotices(context.Background(), pool, false)
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewCoordinator(CoordinatorOptions{
		River: RiverOptions{Pool: pool, ClientID: uuid.NewString(), Logger: dbtest.Logger(t), Work: true, FetchPollInterval: time.Hour,
			Workers: Options{DB: pool, Publisher: noopPublisher{}, RetryBackoff: func(int) time.Duration { return backoff },
				Webhook: WebhookOptions{AllowPrivate: true}}},
		Claim:     jobs.ClaimerOptions{Pacing: jobs.Pacing{StartJitter: time.Millisecond, IdlePoll: time.Hour}},
		Listening: func() bool { return true },
		Notices:   notices,
	})
	if err != nil {
		t.Fatal(err)
	}
	web := newWebClient(t, pool)
	return &fetchBundle{testBundle: &testBundle{pool: pool, river: web, owner: dbtest.User(t, pool, nil).ID}, queue: q, web: web, notices: notices}
}

// newWebClient is the River client of a web-only replica.
func newWebClient(t *testing.T, pool *pgxpool.Pool) *river.Client[pgx.Tx] {
	t.Helper()
	web, err := NewRiver(RiverOptions{Pool: pool, ClientID: uuid.NewString(), Logger: dbtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return web.Client()
}

// start starts the job queue and returns once its claim loop has read what there is
// and sleeps for its idle poll (an hour): it claimed a tick due now, whose
// run then finished (the loop asks once more right after its claim).
func (b *fetchBundle) start(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	tick := b.task(t, jobs.Action{Type: jobs.ActionPublish, Event: "tick"})
	if _, err := b.pool.Exec(ctx, `UPDATE tasks SET next_run_at = now() WHERE id = $1`, tick.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.queue.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.queue.Stop)
	testwait.For(t, 20*time.Second, "the claim loop's tick to run", func() bool {
		var n int
		return b.pool.QueryRow(ctx, `SELECT count(*) FROM task_runs WHERE task_id = $1 AND status = 'succeeded'`, tick.ID).Scan(&n) == nil && n == 1
	})
}

// listen rings the worker's notices on every TasksChannel notification,
// as the bus does.
func (b *fetchBundle) listen(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+jobs.TasksChannel); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
				return
			}
			b.notices.Handlers()[jobs.TasksChannel]()
		}
	}()
	t.Cleanup(func() { cancel(); <-done; conn.Release() })
}

// startedAt waits for the run to start and returns when it did.
func (b *fetchBundle) startedAt(t *testing.T, runID string) time.Time {
	t.Helper()
	var started time.Time
	testwait.For(t, 20*time.Second, "run "+runID+" to start", func() bool {
		return b.pool.QueryRow(context.Background(), `SELECT started_at FROM task_runs WHERE id = $1 AND started_at IS NOT NULL`, runID).
			Scan(&started) == nil
	})
	return started
}

// TestDelayedRunStartsAtRunAt: a run delayed by run_at, triggered on a
// web-only replica, starts at run_at on a worker that did not insert it
// and polls once an hour: the trigger's notice wakes the worker's sleeping
// claim loop, whose idle question finds run_at, and its insert notifier notifies
// the producers then.
func TestDelayedRunStartsAtRunAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newFetchBundle(t, time.Second)
	task := b.task(t, jobs.Action{Type: jobs.ActionPublish, Event: "later"})
	b.start(t)
	b.listen(t)
	runAt := time.Now().Add(1500 * time.Millisecond)
	res, err := jobs.Trigger(ctx, b.pool, b.web, quota.Limits{}, jobs.TriggerRequest{ProjectID: personal(t, b.pool, b.owner), TaskID: task.ID, RunAt: &runAt})
	if err != nil {
		t.Fatal(err)
	}
	started := b.startedAt(t, res.Run.ID)
	if started.Before(runAt) {
		t.Fatalf("run started at %v, before run_at %v", started, runAt)
	}
	t.Logf("started %v after run_at", started.Sub(runAt))
}

// TestRetryStartsAtBackoff: a retry two seconds after a failed attempt
// starts then on a worker polling once an hour, its claim loop asleep:
// the worker told the claim loop's insert notifier of the retry's time.
func TestRetryStartsAtBackoff(t *testing.T) {
	t.Parallel()
	b := newFetchBundle(t, 2*time.Second)
	hook := newHookServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 0 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	task := b.task(t, webhook(hook.URL), func(t *jobs.Task) { t.MaxAttempts = 3 })
	b.start(t)
	run := b.trigger(t, task.ID)
	if got := b.waitRun(t, run.ID, 20*time.Second); got.Status != jobs.StatusSucceeded {
		t.Fatalf("run %s after the retry, want succeeded", got.Status)
	}
	hits := hook.requests()
	if len(hits) != 2 || hits[1].at.Sub(hits[0].at) < 2*time.Second {
		t.Fatalf("%d attempts; want the retry 2 s after the first", len(hits))
	}
	t.Logf("retry %v after the first attempt (backoff 2s)", hits[1].at.Sub(hits[0].at))
}

// TestSnoozedRunStartsWhenSlotFrees: with max_concurrency 1, a second run
// waits for the slot (snoozes SlotWait at a time) and starts within about
// SlotWait of the first finishing, on a worker polling once an hour.
func TestSnoozedRunStartsWhenSlotFrees(t *testing.T) {
	t.Parallel()
	b := newFetchBundle(t, time.Second)
	release := make(chan struct{})
	hook := newHookServer(t, func(n int, _ http.ResponseWriter, _ *http.Request) {
		if n == 0 {
			<-release
		}
	})
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free) // before the server's Close waits for the handler
	one := 1
	task := b.task(t, webhook(hook.URL), func(t *jobs.Task) { t.Overlap = jobs.OverlapAllow; t.MaxConcurrency = &one })
	b.start(t)
	first := b.trigger(t, task.ID)
	testwait.For(t, 20*time.Second, "the first run to call its webhook", func() bool { return len(hook.requests()) == 1 })
	// Another web replica: River's client sends at most one insert
	// notification per queue per FetchCooldown (25 ms).
	second, err := jobs.TriggerRun(context.Background(), b.pool, newWebClient(t, b.pool), personal(t, b.pool, b.owner), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the second run to snooze", func() bool {
		var snoozes int
		err := b.pool.QueryRow(context.Background(), `SELECT coalesce((metadata->>'snoozes')::int, 0) FROM river_job WHERE args @> jsonb_build_object('run_id', $1::text)`,
			second.ID).Scan(&snoozes)
		return err == nil && snoozes >= 2
	})
	free()
	done := b.waitRun(t, first.ID, 20*time.Second)
	started := b.startedAt(t, second.ID)
	t.Logf("second run started %v after the first finished (SlotWait %v)", started.Sub(*done.FinishedAt), SlotWait)
	if got := b.waitRun(t, second.ID, 20*time.Second); got.Status != jobs.StatusSucceeded {
		t.Fatalf("second run %s, want succeeded", got.Status)
	}
}
