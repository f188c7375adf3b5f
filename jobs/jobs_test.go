package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }

type testBundle struct {
	pool  *pgxpool.Pool
	river *river.Client[pgx.Tx]
	owner string
	// project is owner's personal project.
	project string
}

// setup gives a test its own database (claims see every due task in it),
// an insert-only River client and a user.
func setup(t testing.TB) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	u := dbtest.User(t, pool, nil)
	return &testBundle{pool: pool, river: client, owner: u.ID, project: u.Project}
}

// task creates an active publish task due at its first tick; mods adjust it.
func (b *testBundle) task(t testing.TB, mods ...func(*Task)) Task {
	t.Helper()
	task := Task{OwnerID: b.owner, ProjectID: b.project, Name: "tick", Schedule: new("@every 1s"), Active: true,
		Action: Action{Type: ActionPublish, Event: "tick"}}
	for _, m := range mods {
		m(&task)
	}
	if err := task.Normalize(false); err != nil {
		t.Fatal(err)
	}
	out, err := CreateTask(context.Background(), b.pool, quota.Limits{}, task)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dueAt moves a task's next tick.
func (b *testBundle) dueAt(t *testing.T, id string, at time.Time) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), `UPDATE tasks SET next_run_at = $2 WHERE id = $1`, id, at); err != nil {
		t.Fatal(err)
	}
}

func (b *testBundle) get(t *testing.T, id string) Task {
	t.Helper()
	task, err := GetTask(context.Background(), b.pool, b.project, id)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func (b *testBundle) runs(t *testing.T, taskID string) []Run {
	t.Helper()
	runs, _, err := ListRuns(context.Background(), b.pool, b.project, taskID, Page{Limit: MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// jobsFor counts River jobs enqueued for a run.
func (b *testBundle) jobsFor(t *testing.T, runID string) (n, maxAttempts int) {
	t.Helper()
	err := b.pool.QueryRow(context.Background(), `
		SELECT count(*), coalesce(max(max_attempts), 0) FROM river_job WHERE kind = 'task_run' AND args->>'run_id' = $1`, runID).
		Scan(&n, &maxAttempts)
	if err != nil {
		t.Fatal(err)
	}
	return n, maxAttempts
}

func (b *testBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually polls cond until it holds or the deadline passes.

// lookout is a claim loop's Lookout in tests: listening answers Listening
// (nil: not listening), outlook is told each look (nil: nobody).
type lookout struct {
	listening func() bool
	outlook   func(Outlook) time.Duration
}

func (l lookout) Listening() bool { return l.listening != nil && l.listening() }

func (l lookout) Outlook(o Outlook) time.Duration {
	if l.outlook == nil {
		return 0
	}
	return l.outlook(o)
}
