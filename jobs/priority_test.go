package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/quota"
)

// TestPriority: a run gets its trigger's priority, else its task's, and its
// River job that priority; the claim loop's look finds waiting jobs of
// every priority.
func TestPriority(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	jobPriority := func(b *testBundle, t *testing.T, runID string) int {
		return b.count(t, `SELECT priority FROM river_job WHERE args->>'run_id' = $1`, runID)
	}

	t.Run("trigger, batch and tick", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.task(t, func(t *Task) { t.Overlap, t.Priority = OverlapAllow, 3 })
		res, err := Trigger(ctx, b.pool, b.river, quota.Limits{}, TriggerRequest{ProjectID: b.project, TaskID: task.ID})
		if err != nil || res.Run.Priority != 3 || jobPriority(b, t, res.Run.ID) != 3 {
			t.Fatalf("trigger without priority: %+v, %v", res.Run, err)
		}
		res, err = Trigger(ctx, b.pool, b.river, quota.Limits{}, TriggerRequest{ProjectID: b.project, TaskID: task.ID, Priority: 1})
		if err != nil || res.Run.Priority != 1 || jobPriority(b, t, res.Run.ID) != 1 {
			t.Fatalf("trigger with priority 1: %+v, %v", res.Run, err)
		}
		items, err := TriggerBatch(ctx, b.pool, b.river, quota.Limits{}, b.project, task.ID, []TriggerRequest{{Priority: 4}, {}, {Priority: 5}})
		if err != nil || items[0].Run.Priority != 4 || jobPriority(b, t, items[0].Run.ID) != 4 ||
			items[1].Run.Priority != 3 || jobPriority(b, t, items[1].Run.ID) != 3 {
			t.Fatalf("batch: %+v, %v", items, err)
		}
		if v, ok := IsValidation(items[2].Err); !ok || v.Field != "priority" {
			t.Fatalf("batch item with priority 5: %+v", items[2])
		}
		b.dueAt(t, task.ID, time.Now().Add(-time.Second))
		if n, err := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river}).ClaimOnce(ctx); n != 1 || err != nil {
			t.Fatalf("ClaimOnce = %d, %v", n, err)
		}
		if n := b.count(t, `SELECT count(*) FROM task_runs r JOIN river_job j ON j.args->>'run_id' = r.id::text
			WHERE r.task_id = $1 AND r.trigger = 'schedule' AND r.priority = 3 AND j.priority = 3`, task.ID); n != 1 {
			t.Fatalf("%d claimed runs of priority 3 with a job of priority 3, want 1", n)
		}
	})

	t.Run("a task's priority is 1 to 4", func(t *testing.T) {
		t.Parallel()
		for _, p := range []int{-1, 5} {
			task := Task{Name: "p", Action: Action{Type: ActionPublish, Event: "e"}, Priority: p}
			if v, ok := IsValidation(task.Normalize(false)); !ok || v.Field != "priority" {
				t.Fatalf("priority %d: %v", p, task.Normalize(false))
			}
		}
	})

	t.Run("the look finds a delayed job of any priority", func(t *testing.T) {
		t.Parallel()
		b, _ := aheadBundle(t)
		task := b.task(t, func(t *Task) { t.Schedule, t.Overlap, t.Priority = nil, OverlapAllow, 4 })
		at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		if _, err := Trigger(ctx, b.pool, b.river, quota.Limits{}, TriggerRequest{ProjectID: b.project, TaskID: task.ID, RunAt: &at}); err != nil {
			t.Fatal(err)
		}
		_, _, jobAt, _, err := dueStats(ctx, b.pool, 0)
		if err != nil || !jobAt.Equal(at) {
			t.Fatalf("the look's next job at %v (%v), want %v", jobAt, err, at)
		}
	})
}
