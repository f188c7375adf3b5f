package jobs

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// insertJob puts a River job in the given state straight into river_job,
// scheduled (or last made available) age ago; negative ages are in the
// future.
func (b *testBundle) insertJob(t *testing.T, state string, age time.Duration) {
	t.Helper()
	finalized := "NULL"
	if state == "completed" || state == "discarded" || state == "cancelled" {
		finalized = "now()"
	}
	_, err := b.pool.Exec(context.Background(), `
		INSERT INTO river_job (kind, args, state, max_attempts, queue, priority, scheduled_at, attempt, finalized_at)
		VALUES ('task_run', '{}', $1::river_job_state, 3, 'default', 1, now() - make_interval(secs => $2), 0, `+finalized+`)`,
		state, age.Seconds())
	if err != nil {
		t.Fatal(err)
	}
}

// scalerValue runs the KEDA trigger's query as KEDA does: one value.
func (b *testBundle) scalerValue(t *testing.T) int64 {
	t.Helper()
	var v int64
	if err := b.pool.QueryRow(context.Background(), ScalerQuery).Scan(&v); err != nil {
		t.Fatalf("scaler query: %v", err)
	}
	return v
}

func TestReadBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("an idle database reads zero everywhere", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.task(t, func(t *Task) { t.Schedule = new("@every 1h") }) // not due
		b.insertJob(t, "completed", time.Minute)
		got, err := ReadBacklog(ctx, b.pool)
		got.NotificationQueueUsage = 0 // the server's, shared with every other test
		if err != nil || got != (cluster.Backlog{}) {
			t.Fatalf("ReadBacklog = %+v, %v; want zeros", got, err)
		}
		if v := b.scalerValue(t); v != 0 {
			t.Fatalf("scaler value = %d, want 0", v)
		}
	})

	t.Run("due tasks, queued, scheduled, retryable and running jobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, late := range []time.Duration{time.Minute, 5 * time.Second} {
			task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
			b.dueAt(t, task.ID, time.Now().Add(-late))
		}
		b.task(t, func(t *Task) { t.Schedule = new("@every 1h") }) // due in an hour
		paused := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		b.dueAt(t, paused.ID, time.Now().Add(-time.Hour))
		if _, err := b.pool.Exec(ctx, `UPDATE tasks SET active = false WHERE id = $1`, paused.ID); err != nil {
			t.Fatal(err)
		}
		for _, age := range []time.Duration{90 * time.Second, time.Second, 0} {
			b.insertJob(t, "available", age)
		}
		b.insertJob(t, "scheduled", -time.Hour)      // not yet
		b.insertJob(t, "scheduled", 10*time.Second)  // due, waiting for River's scheduler
		b.insertJob(t, "retryable", -time.Minute)    // retries later
		b.insertJob(t, "retryable", 120*time.Second) // due: the oldest ready job
		b.insertJob(t, "running", 30*time.Second)    // in flight
		b.insertJob(t, "running", time.Second)       // in flight
		b.insertJob(t, "completed", 200*time.Second) // history: not counted
		b.insertJob(t, "discarded", 300*time.Second) // history: not counted

		got, err := ReadBacklog(ctx, b.pool)
		if err != nil {
			t.Fatal(err)
		}
		want := cluster.Backlog{
			Demand:        3 + 2 + 2 + 2, // available + scheduled due + running + due tasks
			AvailableJobs: 3, ScheduledJobs: 4, ScheduledDueJobs: 2, RunningJobs: 2, DueTasks: 2,
			OldestAvailableAgeMS: got.OldestAvailableAgeMS, OldestDueAgeMS: got.OldestDueAgeMS,
			NotificationQueueUsage: got.NotificationQueueUsage,
		}
		if got != want {
			t.Fatalf("ReadBacklog =\n %+v, want\n %+v", got, want)
		}
		if a := got.OldestAvailableAgeMS; a < 120_000 || a > 130_000 {
			t.Errorf("oldest available age = %d ms, want the due retryable's 120 s", a)
		}
		if a := got.OldestDueAgeMS; a < 60_000 || a > 70_000 {
			t.Errorf("oldest due age = %d ms, want the active task's minute (not the paused task's hour)", a)
		}
		if v := b.scalerValue(t); v != got.Demand {
			t.Fatalf("scaler value = %d, want demand %d", v, got.Demand)
		}
	})

	t.Run("a claimed tick leaves the due tasks for the queue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		b.dueAt(t, task.ID, time.Now().Add(-time.Second))
		before, err := ReadBacklog(ctx, b.pool)
		if err != nil || before.DueTasks != 1 || before.Demand != 1 {
			t.Fatalf("before the claim: %+v, %v", before, err)
		}
		if n, err := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river}).ClaimOnce(ctx); n != 1 || err != nil {
			t.Fatalf("ClaimOnce = %d, %v", n, err)
		}
		after, err := ReadBacklog(ctx, b.pool)
		if err != nil || after.DueTasks != 0 || after.AvailableJobs != 1 || after.Demand != 1 {
			t.Fatalf("after the claim: %+v, %v; want the tick as one available job", after, err)
		}
	})

	t.Run("the NOTIFY queue usage is PostgreSQL's", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A listener inside a transaction reads no notifications, so the
		// queue keeps what is sent after it (the queue is the server's:
		// other tests only add to it).
		hold, err := b.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer hold.Release()
		if _, err := hold.Exec(ctx, `LISTEN backlog_test`); err != nil {
			t.Fatal(err)
		}
		if _, err := hold.Exec(ctx, `BEGIN`); err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = hold.Exec(ctx, `ROLLBACK`) }()
		// 257 notifications of ~8 KB, a queue page each (an entry does
		// not cross pages): at least 256 pages past the listener's of the
		// 8 GB queue. (The first may go on the listener's own page, which
		// the usage does not count: 256 notifications read 255 pages.)
		if _, err := b.pool.Exec(ctx, `SELECT pg_notify('backlog_test', repeat('x', 7900) || g) FROM generate_series(1, 257) g`); err != nil {
			t.Fatal(err)
		}
		got, err := ReadBacklog(ctx, b.pool)
		if err != nil || got.NotificationQueueUsage < 256.0/(1<<20) || got.NotificationQueueUsage > 1 {
			t.Fatalf("usage = %v, %v; want at least the held 256 of 2^20 pages", got.NotificationQueueUsage, err)
		}
	})
}

// TestScalerQueryIsTheChartsFile: the chart cannot import this package, so
// it carries a copy of backlog.sql that its KEDA trigger reads; they must
// not drift (the chart's tests compare the rendered trigger to the copy).
func TestScalerQueryIsTheChartsFile(t *testing.T) {
	t.Parallel()
	chartCopy, err := os.ReadFile("../chart/files/backlog.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(chartCopy) != backlogSQL {
		t.Fatal("chart/files/backlog.sql differs from jobs/backlog.sql; copy jobs/backlog.sql over it")
	}
	// The chart's tests build the rendered trigger query the same way.
	if want := "SELECT demand FROM (\n" + string(chartCopy) + ") AS backlog"; ScalerQuery != want {
		t.Fatalf("ScalerQuery = %q, want %q", ScalerQuery, want)
	}
}

func TestBacklogReader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a reading is reused for MaxAge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		r := NewBacklogReader(BacklogOptions{DB: b.pool, MaxAge: time.Hour})
		first, err := r.Read(ctx)
		if err != nil || first.AvailableJobs != 0 {
			t.Fatalf("first read = %+v, %v", first, err)
		}
		b.insertJob(t, "available", 0)
		if again, err := r.Read(ctx); err != nil || again != first {
			t.Fatalf("second read within MaxAge = %+v, %v; want the cached %+v", again, err, first)
		}
		fresh := NewBacklogReader(BacklogOptions{DB: b.pool, MaxAge: time.Nanosecond})
		if got, err := fresh.Read(ctx); err != nil || got.AvailableJobs != 1 {
			t.Fatalf("read past MaxAge = %+v, %v; want the new job", got, err)
		}
	})

	t.Run("exports the reading as gauges", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		b.dueAt(t, task.ID, time.Now().Add(-2*time.Second))
		b.insertJob(t, "available", 3*time.Second)
		b.insertJob(t, "running", 0)
		reg := prometheus.NewRegistry()
		reg.MustRegister(NewBacklogReader(BacklogOptions{DB: b.pool}))
		want := map[string]float64{
			"switchboard_backlog_demand": 3, "switchboard_backlog_available_jobs": 1,
			"switchboard_backlog_running_jobs": 1, "switchboard_backlog_due_tasks": 1,
			"switchboard_backlog_scheduled_jobs": 0, "switchboard_backlog_scheduled_due_jobs": 0,
			"switchboard_backlog_read_errors_total": 0,
		}
		got := gathered(t, reg)
		for name, v := range want {
			if g, ok := got[name]; !ok || g != v {
				t.Errorf("%s = %v (exported %v), want %v", name, g, ok, v)
			}
		}
		if a := got["switchboard_backlog_oldest_available_age_seconds"]; a < 3 || a > 10 {
			t.Errorf("oldest available age = %v s, want about 3", a)
		}
		if a := got["switchboard_backlog_oldest_due_age_seconds"]; a < 2 || a > 10 {
			t.Errorf("oldest due age = %v s, want about 2", a)
		}
		if u, ok := got["switchboard_notification_queue_usage_ratio"]; !ok || u < 0 || u > 1 {
			t.Errorf("notification queue usage = %v (exported %v), want a fraction", u, ok)
		}
		if n, err := testutil.GatherAndCount(reg); err != nil || n != 10 {
			t.Errorf("%d series (%v), want 10", n, err)
		}
	})

	t.Run("a failed reading leaves the gauges out and counts the error", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.NewPool(t)
		pool.Close()
		reg := prometheus.NewRegistry()
		reg.MustRegister(NewBacklogReader(BacklogOptions{DB: pool}))
		got := gathered(t, reg)
		if _, ok := got["switchboard_backlog_demand"]; ok || len(got) != 1 || got["switchboard_backlog_read_errors_total"] != 1 {
			t.Fatalf("exported %v; want only one read error", got)
		}
	})
}

// gathered is every unlabelled sample of reg by name.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				out[f.GetName()] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[f.GetName()] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
