package jobs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/quota"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// outlooks records what a claim loop's looks found.
type outlooks struct {
	mu   sync.Mutex
	seen []Outlook
}

func (o *outlooks) add(x Outlook) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, x)
}

func (o *outlooks) all() []Outlook {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Outlook(nil), o.seen...)
}

// An Outlook that asks to be told again 5 s ahead gets a look about 5 s
// before the tick, before the claim: that is how a parked River client
// (workers.River) starts in time. Without the request the loop sleeps
// from its first look (12 s ahead) straight to the claim.
func TestOutlookIsToldAheadOfTheTick(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
	tick := time.Now().Add(12 * time.Second)
	b.dueAt(t, task.ID, tick)
	const ahead = 5 * time.Second
	var seen outlooks
	c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river, Pacing: Pacing{StartJitter: time.Millisecond,
		IdlePoll: time.Hour, // no poll: only the tick (and the look ahead) wake it
		Lookout:  lookout{listening: func() bool { return true }, outlook: func(o Outlook) time.Duration { seen.add(o); return ahead }}}})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	testwait.For(t, 30*time.Second, "the tick's run", func() bool { return len(b.runs(t, task.ID)) > 0 })
	all := seen.all()
	if len(all) == 0 || all[0].Claim <= ahead {
		t.Fatalf("first look %+v: the test needs it earlier than %s before the tick (a stalled start)", all, ahead)
	}
	for _, o := range all {
		if o.Claim > ahead-time.Second && o.Claim <= ahead {
			if o.Available || o.Job != NoWork {
				t.Fatalf("look %+v: no job waits or is fetchable", o)
			}
			return
		}
	}
	t.Fatalf("looks %+v: none told of the tick %s ahead", all, ahead)
}

// The look tells of a job fetchable now and of one waiting for later.
func TestOutlookTellsOfJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var seen outlooks
	c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river, Pacing: Pacing{Lookout: lookout{outlook: func(o Outlook) time.Duration { seen.add(o); return 0 }}}})
	look := func() Outlook {
		n := len(seen.all())
		c.untilNext(ctx)
		all := seen.all()
		if len(all) != n+1 {
			t.Fatalf("%d looks told, want one more than %d", len(all), n)
		}
		return all[n]
	}
	if o := look(); o.Available || o.Job != NoWork || o.Claim != NoWork {
		t.Fatalf("empty database: %+v", o)
	}
	task := b.task(t, func(t *Task) { t.Schedule, t.Overlap = new("@every 1h"), OverlapAllow })
	if o := look(); o.Claim <= 0 || o.Claim > time.Hour {
		t.Fatalf("a task due within the hour: %+v", o)
	}
	later := time.Now().Add(time.Hour)
	if _, err := Trigger(ctx, b.pool, b.river, quota.Limits{}, TriggerRequest{ProjectID: b.project, TaskID: task.ID, RunAt: &later}); err != nil {
		t.Fatal(err)
	}
	if o := look(); o.Available || o.Job <= 50*time.Minute || o.Job > time.Hour {
		t.Fatalf("a run delayed by an hour: %+v", o)
	}
	if _, err := TriggerRun(ctx, b.pool, b.river, b.project, task.ID); err != nil {
		t.Fatal(err)
	}
	if o := look(); !o.Available {
		t.Fatalf("a run fetchable now: %+v", o)
	}
}
