package workers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/jobs"
)

// TestExactlyOncePerTick is the product's promise: three replicas (each its
// own pool, River client and claim loop) share one database; 200 tasks
// `@every 1s` produce exactly one run per (task, tick), counted in task_runs
// and at the webhook target, also while one replica is stopped and a new
// one started mid-way.
func TestExactlyOncePerTick(t *testing.T) {
	t.Parallel()
	duration := 20 * time.Second
	if testing.Short() {
		duration = 8 * time.Second
	}
	t.Run("three replicas", func(t *testing.T) {
		t.Parallel()
		exactlyOnce(t, duration, false, 0)
	})
	t.Run("one of three stopped and restarted mid-way", func(t *testing.T) {
		t.Parallel()
		exactlyOnce(t, duration, true, 0)
	})
	// Ticks claimed up to two ahead (Pacing.Lead), replicas
	// stopped with ticks claimed but not yet due.
	t.Run("claiming ahead, one of three stopped and restarted mid-way", func(t *testing.T) {
		t.Parallel()
		exactlyOnce(t, duration, true, 2*time.Second)
	})
}

type tickKey struct {
	task string
	tick int64 // unix microseconds: time.Time keys would compare locations
}

// tickRecorder is the webhook target: it counts deliveries per (task, tick).
type tickRecorder struct {
	mu    sync.Mutex
	seen  map[tickKey]int
	total int
}

func (r *tickRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	tick, err := time.Parse(time.RFC3339Nano, req.Header.Get("X-Switchboard-Scheduled-For"))
	if err != nil {
		http.Error(w, "no tick", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.seen[tickKey{req.Header.Get("X-Switchboard-Task-Id"), tick.UnixMicro()}]++
	r.total++
	r.mu.Unlock()
}

// replica is one worker node: its own pool, River client and claim loop.
type replica struct {
	pool    *pgxpool.Pool
	river   *river.Client[pgx.Tx]
	claimer *jobs.Claimer
	stopped bool
}

type noopPublisher struct{}

func (noopPublisher) PublishUser(context.Context, string, string, any) error { return nil }
func (noopPublisher) PublishRoom(context.Context, string, string, any) error { return nil }
func (noopPublisher) PublishProject(context.Context, string, string, any) error {
	return nil
}

// startReplica starts a replica claiming ticks lead ahead (0: once due).
func startReplica(t *testing.T, url string, lead time.Duration) *replica {
	t.Helper()
	ctx := context.Background()
	pool, err := db.Connect(ctx, url, db.Options{MaxConns: 10})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{pool: pool}
	r.river = startRiver(t, pool, Options{
		ClientID: uuid.NewString(), DB: pool, Publisher: noopPublisher{}, Webhook: WebhookOptions{AllowPrivate: true},
	}, time.Second)
	// A busy CI machine can fall seconds behind; what is under test is that
	// late ticks still run once each, so they must not fold as "missed".
	r.claimer = jobs.NewClaimer(jobs.ClaimerOptions{DB: pool, River: r.river, Logger: dbtest.Logger(t), CatchUp: time.Hour,
		Pacing: jobs.Pacing{Lead: lead}})
	if err := r.claimer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return r
}

// stop shuts the replica down the way SIGTERM does: the claim loop stops
// (a claim in flight commits or rolls back whole), River finishes its jobs.
func (r *replica) stop() {
	if r.stopped {
		return
	}
	r.stopped = true
	r.claimer.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = r.river.Stop(ctx)
	r.pool.Close()
}

func exactlyOnce(t *testing.T, duration time.Duration, restart bool, lead time.Duration) {
	ctx := context.Background()
	url := dbtest.NewDatabaseURL(t)
	admin, err := db.Connect(ctx, url, db.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	rec := &tickRecorder{seen: map[tickKey]int{}}
	target := httptest.NewServer(rec)
	defer target.Close()

	const tasks = 200
	owner := dbtest.User(t, admin, nil).ID
	first := map[string]time.Time{}
	for i := range tasks {
		task := jobs.Task{OwnerID: owner, Name: fmt.Sprint("tick-", i), Schedule: new("@every 1s"), Active: true,
			Overlap: jobs.OverlapAllow, Action: webhook(target.URL + "/tick")}
		if err := task.Normalize(true); err != nil {
			t.Fatal(err)
		}
		created, err := jobs.CreateTask(ctx, admin, quota.Limits{}, task)
		if err != nil {
			t.Fatal(err)
		}
		first[created.ID] = *created.NextRunAt
	}

	replicas := []*replica{startReplica(t, url, lead), startReplica(t, url, lead), startReplica(t, url, lead)}
	start := time.Now()
	if restart {
		<-time.After(time.Until(start.Add(duration / 3)))
		replicas[0].stop()
		t.Logf("replica 0 stopped at %v", time.Since(start).Round(time.Millisecond))
		<-time.After(time.Until(start.Add(2 * duration / 3)))
		replicas[0] = startReplica(t, url, lead)
		t.Logf("replica 0 replaced at %v", time.Since(start).Round(time.Millisecond))
	}
	<-time.After(time.Until(start.Add(duration)))

	// Stop scheduling: after this commits no tick is claimed any more. The
	// old next_run_at is each task's first unclaimed tick.
	stopped := time.Now()
	rows, err := admin.Query(ctx, `
		WITH old AS (SELECT id, next_run_at FROM tasks FOR UPDATE)
		UPDATE tasks t SET active = false, next_run_at = NULL FROM old WHERE t.id = old.id
		RETURNING t.id::text, old.next_run_at, t.skipped_ticks`)
	if err != nil {
		t.Fatal(err)
	}
	end := map[string]time.Time{}
	var lag time.Duration
	var id string
	var next time.Time
	var skipped int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &next, &skipped}, func() error {
		end[id] = next
		if skipped != 0 {
			t.Errorf("task %s skipped %d ticks", id, skipped)
		}
		lag = max(lag, stopped.Sub(next))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("claims were up to %v behind when scheduling stopped", lag.Round(time.Millisecond))
	testwait.For(t, 5*time.Minute, "every run to finish", func() bool {
		var open int
		_ = admin.QueryRow(ctx, `SELECT count(*) FROM task_runs WHERE finished_at IS NULL`).Scan(&open)
		return open == 0
	})
	for _, r := range replicas {
		r.stop()
	}
	verifyTicks(t, admin, rec, first, end, duration)
}

// verifyTicks checks every task ran each tick in [first, end) exactly once,
// in task_runs and at the webhook target.
func verifyTicks(t *testing.T, q db.DB, rec *tickRecorder, first, end map[string]time.Time, duration time.Duration) {
	t.Helper()
	ctx := context.Background()
	rows, err := q.Query(ctx, `SELECT task_id::text, scheduled_for, status, trigger FROM task_runs`)
	if err != nil {
		t.Fatal(err)
	}
	ticks := map[string][]time.Time{}
	var taskID, status, trigger string
	var tick time.Time
	if _, err := pgx.ForEachRow(rows, []any{&taskID, &tick, &status, &trigger}, func() error {
		if status != jobs.StatusSucceeded || trigger != jobs.TriggerSchedule {
			t.Errorf("run of %s at %v: %s %s", taskID, tick, status, trigger)
		}
		ticks[taskID] = append(ticks[taskID], tick)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	runs, missing, dups := 0, 0, 0
	for id, from := range first {
		got := ticks[id]
		sort.Slice(got, func(i, j int) bool { return got[i].Before(got[j]) })
		want := 0
		for at := from; at.Before(end[id]); at = at.Add(time.Second) {
			want++
		}
		runs += len(got)
		seen := map[int64]bool{}
		for _, g := range got {
			if seen[g.UnixMicro()] {
				dups++
			}
			seen[g.UnixMicro()] = true
			if n := rec.seen[tickKey{id, g.UnixMicro()}]; n != 1 {
				t.Errorf("task %s tick %v reached the target %d times", id, g, n)
			}
		}
		for at := from; at.Before(end[id]); at = at.Add(time.Second) {
			if !seen[at.UnixMicro()] {
				missing++
			}
		}
		// Not a speed check (claims lag far behind on a loaded machine under
		// -race; the lag is logged and benchmarked instead): it only makes
		// sure the test cannot pass with a claim loop that leaves a task
		// unclaimed.
		if want < 1 {
			t.Errorf("task %s: only %d ticks were claimed in %v", id, want, duration)
		}
		if len(got) != want {
			t.Errorf("task %s: %d runs for %d ticks from %v to %v", id, len(got), want, from, end[id])
		}
	}
	if rec.total != runs {
		t.Errorf("the target received %d calls for %d runs", rec.total, runs)
	}
	if missing != 0 || dups != 0 {
		t.Errorf("%d missing ticks, %d duplicates", missing, dups)
	}
	var workers int
	_ = q.QueryRow(ctx, `SELECT count(DISTINCT attempted_by[1]) FROM river_job WHERE kind = 'task_run'`).Scan(&workers)
	t.Logf("%d tasks, %d runs, %d deliveries, worked by %d River clients", len(first), runs, rec.total, workers)
}
