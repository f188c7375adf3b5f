package workers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/jobs"
)

// parkingRiver is a working River on pool that parks after 100 ms idle.
func parkingRiver(t *testing.T, pool *pgxpool.Pool, stopTimeout time.Duration) *River {
	t.Helper()
	r, err := NewRiver(RiverOptions{Pool: pool, ClientID: uuid.NewString(), Logger: dbtest.Logger(t), Work: true,
		Workers: Options{DB: pool, Webhook: WebhookOptions{AllowPrivate: true}}, StopTimeout: stopTimeout,
		Park: ParkOptions{After: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// nothingDue is the claim loop's look on an idle cluster.
var nothingDue = jobs.Outlook{Claim: jobs.NoWork, Job: jobs.NoWork}

// park tells r nothing is due until it parks.
func park(t *testing.T, r *River) {
	t.Helper()
	testwait.For(t, 10*time.Second, "River to park", func() bool {
		r.Outlook(nothingDue)
		return r.Parked()
	})
}

// parkTask creates a task of owner with action, due in an hour.
func parkTask(t *testing.T, pool *pgxpool.Pool, owner string, action jobs.Action) string {
	t.Helper()
	task := jobs.Task{OwnerID: owner, Name: "park-" + uuid.NewString()[:8], Schedule: new("@every 1h"), Active: true,
		Overlap: jobs.OverlapAllow, Action: action}
	if err := task.Normalize(true); err != nil {
		t.Fatal(err)
	}
	out, err := jobs.CreateTask(context.Background(), pool, quota.Limits{}, task)
	if err != nil {
		t.Fatal(err)
	}
	return out.ID
}

func waitRunStatus(t *testing.T, pool *pgxpool.Pool, id, want string) {
	t.Helper()
	testwait.For(t, 20*time.Second, "run "+id+" "+want, func() bool {
		var s string
		if err := pool.QueryRow(context.Background(), `SELECT status FROM task_runs WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s == want
	})
}

// slowRunning starts a parking River (stopTimeout) running a webhook run
// whose target answers only once release is called (at the latest when
// the test ends, before River stops); it returns once the run runs.
func slowRunning(t *testing.T, pool *pgxpool.Pool, owner string, stopTimeout time.Duration) (r *River, task, runID string, release func()) {
	t.Helper()
	answer := make(chan struct{})
	release = sync.OnceFunc(func() { close(answer) })
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		<-answer
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(target.Close)
	r = parkingRiver(t, pool, stopTimeout)
	t.Cleanup(release) // before r.Stop: cleanups run last first
	task = parkTask(t, pool, owner, jobs.Action{Type: jobs.ActionWebhook, URL: target.URL, Method: http.MethodPost})
	run, err := jobs.TriggerRun(context.Background(), pool, r.Client(), personal(t, pool, owner), task)
	if err != nil {
		t.Fatal(err)
	}
	r.Wake()
	waitRunStatus(t, pool, run.ID, jobs.StatusRunning)
	return r, task, run.ID, release
}

func TestRiverParks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner := dbtest.User(t, pool, nil).ID

	t.Run("work near wakes it, and a wake works a job", func(t *testing.T) {
		t.Parallel()
		r := parkingRiver(t, pool, 5*time.Second)
		park(t, r)
		// A tick within UnparkLead: the claim loop's look starts River.
		if ahead := r.Outlook(jobs.Outlook{Claim: UnparkLead / 2, Job: jobs.NoWork}); ahead != 0 {
			t.Fatalf("work near: asked to look again %s ahead", ahead)
		}
		testwait.For(t, 10*time.Second, "River to start for the tick", func() bool { return !r.Parked() })
		park(t, r)
		if ahead := r.Outlook(jobs.Outlook{Claim: ParkHorizon / 2 * 3 / 2, Job: jobs.NoWork}); ahead != UnparkLead || !r.Parked() {
			t.Fatalf("a tick in %s, parked: asked %s ahead (parked %v), want %s, still parked", ParkHorizon*3/4, ahead, r.Parked(), UnparkLead)
		}
		task := parkTask(t, pool, owner, jobs.Action{Type: jobs.ActionPublish, Event: "parked"})
		run, err := jobs.TriggerRun(ctx, pool, r.Client(), personal(t, pool, owner), task)
		if err != nil {
			t.Fatal(err)
		}
		r.Wake() // what the insert notification does, through the bus
		waitRunStatus(t, pool, run.ID, jobs.StatusSucceeded)
	})

	// A job fetched as River parks keeps the stop waiting past its
	// timeout; once it ends, a wake must still start River (a Start
	// while a Stop has not finished does nothing).
	t.Run("a park that waited for a running job still wakes", func(t *testing.T) {
		t.Parallel()
		r, task, slow, release := slowRunning(t, pool, owner, 300*time.Millisecond)
		r.parkNow(ctx) // as if the job had been fetched after the quiet check
		if !r.Parked() {
			t.Fatal("not parked after the stop timed out")
		}
		// Work arrives while that stop still waits for the job.
		next, err := jobs.TriggerRun(ctx, pool, r.Client(), personal(t, pool, owner), task)
		if err != nil {
			t.Fatal(err)
		}
		r.Wake()
		release()
		waitRunStatus(t, pool, slow, jobs.StatusSucceeded)
		waitRunStatus(t, pool, next.ID, jobs.StatusSucceeded)
	})

	// A park's stop may wait for a job fetched meanwhile (up to
	// StopTimeout); a drain begun then must not wait behind it.
	t.Run("a drain does not wait for a park's stop", func(t *testing.T) {
		t.Parallel()
		r, _, _, _ := slowRunning(t, pool, owner, time.Minute)
		go r.parkNow(ctx) // its stop waits for the job, held until the test ends
		testwait.For(t, 5*time.Second, "the park", r.Parked)
		drained := make(chan struct{})
		go func() { r.Drain(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(5 * time.Second):
			t.Fatal("Drain waited for the park's stop (the job still runs)")
		}
	})

	t.Run("drained or stopped while parked, it stays stopped", func(t *testing.T) {
		t.Parallel()
		// A database of its own: the other subtests' clients would work
		// its run.
		pool := dbtest.NewPool(t)
		owner := dbtest.User(t, pool, nil).ID
		r := parkingRiver(t, pool, 5*time.Second)
		park(t, r)
		// Parked is said as the park's stop begins; with no job running
		// it ends at once, and from then on River fetches nothing. (A job
		// fetched before it would be worked: a drain lets running jobs
		// finish.)
		testwait.For(t, 30*time.Second, "the park's stop to end", func() bool {
			stopped := r.Client().Stopped()
			if stopped == nil {
				return false
			}
			select {
			case <-stopped:
				return true
			default:
				return false
			}
		})
		r.Drain()
		r.Wake()
		r.Outlook(jobs.Outlook{Claim: 0, Job: jobs.NoWork, Available: true})
		task := parkTask(t, pool, owner, jobs.Action{Type: jobs.ActionPublish, Event: "drained"})
		run, err := jobs.TriggerRun(ctx, pool, r.Client(), personal(t, pool, owner), task)
		if err != nil {
			t.Fatal(err)
		}
		r.Wake()
		queued := func() {
			t.Helper()
			var status string
			if err := pool.QueryRow(ctx, `SELECT status FROM task_runs WHERE id = $1`, run.ID).Scan(&status); err != nil || status != jobs.StatusQueued {
				t.Fatalf("a drained node worked a run: %s (%v)", status, err)
			}
		}
		// Still drained a second later (an unpark would have started River
		// and run it within milliseconds), then stopped.
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			queued()
		}
		r.Stop()
		queued()
	})
}

// A retry due after River parked: the claim loop looks UnparkLead before
// it (the retry's job waits, retryable, for River's scheduler, which only
// a running leader runs), River starts, and the retry runs. Only the
// look-ahead can wake it here: nothing hears the insert notifier's notification
// while River is parked (no bus in this test) and the loop's idle poll is
// an hour.
func TestParkedRiverRunsARetryDueLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner := dbtest.User(t, pool, nil).ID
	var calls atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(target.Close)
	const backoff = ParkHorizon + 2*time.Second // past the horizon: River parks meanwhile
	q, err := NewCoordinator(CoordinatorOptions{
		River: RiverOptions{Pool: pool, ClientID: uuid.NewString(), Logger: dbtest.Logger(t), Work: true,
			Workers: Options{DB: pool, Webhook: WebhookOptions{AllowPrivate: true},
				RetryBackoff: func(int) time.Duration { return backoff }},
			StopTimeout: 5 * time.Second, Park: ParkOptions{After: 100 * time.Millisecond}},
		Claim:     jobs.ClaimerOptions{Pacing: jobs.Pacing{IdlePoll: time.Hour}},
		Listening: func() bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Stop)
	r := q.River()

	task := parkTask(t, pool, owner, jobs.Action{Type: jobs.ActionWebhook, URL: target.URL, Method: http.MethodPost})
	run, err := jobs.TriggerRun(ctx, pool, r.Client(), personal(t, pool, owner), task)
	if err != nil {
		t.Fatal(err)
	}
	r.Wake()
	testwait.For(t, 20*time.Second, "the first attempt to fail", func() bool { return calls.Load() >= 1 })
	parks := r.Parks()
	testwait.For(t, 20*time.Second, "River to park while the retry waits", func() bool { return r.Parks() > parks })
	waitRunStatus(t, pool, run.ID, jobs.StatusSucceeded)
	var late time.Duration
	if err := pool.QueryRow(ctx, `
		SELECT a2.started_at - a1.finished_at FROM task_run_attempts a1, task_run_attempts a2
		WHERE a1.run_id = $1 AND a1.attempt = 1 AND a2.run_id = $1 AND a2.attempt = 2`, run.ID).Scan(&late); err != nil {
		t.Fatal(err)
	}
	t.Logf("attempt 2 started %s after attempt 1 ended (backoff %s), River parked in between", late, backoff)
}
