package workers

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/dbtest"
	"github.com/switchboard/switchboard/infra/testwait"
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
	c := jobs.NewClaimer(jobs.ClaimerOptions{DB: pool, River: client, Logger: dbtest.Logger(t), Lead: jobs.MaxLead, StartJitter: time.Millisecond})
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
