package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

func TestIdleRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("nothing due: one statement, no claim transaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		later := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		b.dueAt(t, later.ID, time.Now().Add(time.Hour))
		counted := &dbtest.CountingDB{DB: b.pool}
		c := NewClaimer(ClaimerOptions{DB: counted, River: b.river})
		wait, claim := c.round(ctx, false)
		if n := counted.Count(); n != 1 || wait != c.pace.MaxSleep || claim {
			t.Fatalf("idle round: %d round trips, sleep %v, claim next %v; want 1, %v, false", n, wait, claim, c.pace.MaxSleep)
		}
	})
	t.Run("listening: nothing due sleeps the idle poll, a known tick is slept until", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		later := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		b.dueAt(t, later.ID, time.Now().Add(time.Hour))
		listening := true
		c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river, Pacing: Pacing{IdlePoll: 40 * time.Second, Lookout: lookout{listening: func() bool { return listening }}}})
		if wait, claim := c.round(ctx, false); wait != 40*time.Second || claim {
			t.Fatalf("idle round while listening: sleep %v, claim next %v; want 40s, false", wait, claim)
		}
		b.dueAt(t, later.ID, time.Now().Add(20*time.Second))
		if wait, claim := c.round(ctx, false); !claim || wait > 20*time.Second+2*time.Millisecond || wait < 19*time.Second {
			t.Fatalf("round before a tick within the idle poll: sleep %v, claim next %v; want about 20s, true", wait, claim)
		}
		listening = false // LISTEN lost: notices may be missed, poll every MaxSleep
		if wait, claim := c.round(ctx, false); wait != c.pace.MaxSleep || claim {
			t.Fatalf("round while not listening: sleep %v, claim next %v; want %v, false", wait, claim, c.pace.MaxSleep)
		}
	})
	t.Run("a run job fetchable within the idle poll: notified then, the loop wakes just after without a claim", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		later := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		b.dueAt(t, later.ID, time.Now().Add(time.Hour))
		runAt := time.Now().Add(20 * time.Second)
		if _, err := Trigger(ctx, b.pool, b.river, quota.Limits{}, TriggerRequest{ProjectID: b.project, TaskID: later.ID, RunAt: &runAt}); err != nil {
			t.Fatal(err)
		}
		c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river, Pacing: Pacing{IdlePoll: 40 * time.Second, Lookout: lookout{listening: func() bool { return true }}}})
		wait, claim := c.round(ctx, false)
		if claim || wait > 20*time.Second+2*time.Millisecond || wait < 19*time.Second {
			t.Fatalf("round before a delayed run: sleep %v, claim next %v; want about 20s, false", wait, claim)
		}
		if at, ok := c.pace.notifier.next(); !ok || !at.Equal(runAt.Truncate(time.Microsecond)) {
			t.Fatalf("insert notifier holds %v, %v; want run_at %v", at, ok, runAt)
		}
	})
	t.Run("a tick due within MaxSleep is claimed when the loop wakes for it", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		soon := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		b.dueAt(t, soon.ID, time.Now().Add(300*time.Millisecond))
		c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
		wait, claim := c.round(ctx, false)
		if !claim || wait > 302*time.Millisecond || wait <= 0 {
			t.Fatalf("round before the tick: sleep %v, claim next %v", wait, claim)
		}
	})
	t.Run("a due tick found by the question is claimed in the same round", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		due := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		b.dueAt(t, due.ID, time.Now().Add(-time.Second))
		c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
		c.round(ctx, false)
		if runs := b.runs(t, due.ID); len(runs) != 1 {
			t.Fatalf("%d runs after the round, want 1", len(runs))
		}
	})
}
