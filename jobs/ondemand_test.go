package jobs

import (
	"context"
	"testing"
	"time"
)

func TestOnDemandTaskIsNeverClaimed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	task := b.task(t, func(t *Task) { t.Schedule = nil })
	if task.NextRunAt != nil || !task.Active || !task.OnDemand() {
		t.Fatalf("on-demand task: next %v active %v", task.NextRunAt, task.Active)
	}
	// Even a stray next_run_at (a schedule cleared under a claimer) is not
	// claimed: the claim reads only tasks that have a schedule.
	b.dueAt(t, task.ID, time.Now().Add(-time.Second))
	if n, err := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river}).ClaimOnce(ctx); n != 0 || err != nil {
		t.Fatalf("ClaimOnce = %d, %v; want 0", n, err)
	}
	if runs := b.runs(t, task.ID); len(runs) != 0 {
		t.Fatalf("runs of an on-demand task: %+v", runs)
	}
}
