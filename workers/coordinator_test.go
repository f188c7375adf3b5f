package workers

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/jobs"
)

// TestCoordinatorAnswersNotices: the notices a replica hears reach the
// claim loop and River through the Coordinator. Its River parks and its
// claim loop sleeps for an hour, so that only the notice can wake them:
// the task notice has the loop claim a tick made due, River's insert
// notification starts River for a job a web replica inserted.
func TestCoordinatorAnswersNotices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner := dbtest.User(t, pool, nil).ID
	notices, err := NewNotices(ctx, pool, true)
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewCoordinator(CoordinatorOptions{
		River: RiverOptions{Pool: pool, ClientID: uuid.NewString(), Logger: dbtest.Logger(t), Work: true,
			Workers: Options{DB: pool, Publisher: noopPublisher{}}, StopTimeout: 5 * time.Second,
			Park: ParkOptions{After: 100 * time.Millisecond}},
		Claim:     jobs.ClaimerOptions{Pacing: jobs.Pacing{StartJitter: time.Millisecond, IdlePoll: time.Hour}},
		Listening: func() bool { return true },
		Notices:   notices,
	})
	if err != nil {
		t.Fatal(err)
	}
	task := parkTask(t, pool, owner, jobs.Action{Type: jobs.ActionPublish, Event: "notice"})
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Stop)
	testwait.For(t, 20*time.Second, "River to park", q.River().Parked)

	parks := q.River().Parks()
	// As an API change on another replica: the task is due now.
	if _, err := pool.Exec(ctx, `UPDATE tasks SET next_run_at = now() WHERE id = $1`, task); err != nil {
		t.Fatal(err)
	}
	notices.Handlers()[jobs.TasksChannel]()
	testwait.For(t, 10*time.Second, "the tick to be claimed", func() bool {
		var n int
		return pool.QueryRow(ctx, `SELECT count(*) FROM task_runs WHERE task_id = $1`, task).Scan(&n) == nil && n == 1
	})
	// The claim's look wakes River for the run; it parks again after.
	testwait.For(t, 20*time.Second, "River to park again", func() bool { return q.River().Parks() > parks && q.River().Parked() })

	run, err := jobs.TriggerRun(ctx, pool, newWebClient(t, pool), personal(t, pool, owner), task)
	if err != nil {
		t.Fatal(err)
	}
	channel, err := jobs.InsertChannel(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	notices.Handlers()[channel]()
	waitRunStatus(t, pool, run.ID, jobs.StatusSucceeded)
}
