package quota_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		q                  quota.Name
		limit, used, asked int
		status             int // 0: allowed
	}{
		{quota.Tasks, 5, 4, 1, 0},
		{quota.Tasks, 5, 5, 1, http.StatusConflict},
		{quota.Rooms, 5, 0, 6, http.StatusConflict},
		{quota.APIKeys, 1, 1, 1, http.StatusConflict},
		{quota.QueuedRuns, 10, 5, 5, 0},
		{quota.QueuedRuns, 10, 5, 6, http.StatusTooManyRequests},
		{quota.BackfillTicks, 10, 11, 1, http.StatusTooManyRequests},
	} {
		err := quota.Check(tc.q, tc.limit, tc.used, tc.asked)
		var e *quota.ExceededError
		switch {
		case tc.status == 0 && err != nil:
			t.Errorf("%+v: %v, want allowed", tc, err)
		case tc.status != 0 && (!errors.As(err, &e) || e.Status() != tc.status || *e != quota.ExceededError{Quota: tc.q, Limit: tc.limit, Used: tc.used, Asked: tc.asked}):
			t.Errorf("%+v: %v, want refused with %d", tc, err, tc.status)
		}
	}
}

func TestOrDefaults(t *testing.T) {
	t.Parallel()
	if got := (quota.Limits{}).OrDefaults(); got != quota.Defaults {
		t.Fatalf("zero limits: %+v, want the defaults", got)
	}
	if got := (quota.Limits{Rooms: 7}).OrDefaults(); got.Rooms != 7 || got.Tasks != quota.Defaults.Tasks {
		t.Fatalf("set limit: %+v", got)
	}
}

// TestCountWaitsForTheHolder: a count of a project's quota waits for the
// transaction that holds its lock, then sees what that one committed; other
// projects and quotas do not wait.
func TestCountWaitsForTheHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE quota_rows (project text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	const countSQL = `SELECT count(*) FROM quota_rows WHERE project = $1`
	project := uuid.NewString()
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if n, err := quota.Count(ctx, holder, quota.Tasks, project, countSQL); err != nil || n != 0 {
		t.Fatalf("first count: %d, %v", n, err)
	}
	if _, err := holder.Exec(ctx, `INSERT INTO quota_rows VALUES ($1)`, project); err != nil {
		t.Fatal(err)
	}
	counted := make(chan int, 1)
	go func() {
		_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			n, err := quota.Count(ctx, tx, quota.Tasks, project, countSQL)
			if err != nil {
				t.Error(err)
			}
			counted <- n
			return nil
		})
	}()
	for _, other := range []struct {
		q       quota.Name
		project string
	}{{quota.Tasks, uuid.NewString()}, {quota.Rooms, project}} {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := quota.Count(ctx, tx, other.q, other.project, countSQL)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 10*time.Second, "the second count to wait on the lock", func() bool {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`).Scan(&waiting)
		return err == nil && waiting
	})
	select {
	case n := <-counted:
		t.Fatalf("counted %d while the lock was held", n)
	default:
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-counted:
		if n != 1 {
			t.Fatalf("counted %d after the holder committed one row, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the count did not go on after the holder committed")
	}
}
