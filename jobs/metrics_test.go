package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

func TestClaimMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	missed := b.task(t, func(t *Task) { t.Schedule = new("@every 1m") })
	b.dueAt(t, missed.ID, time.Now().Add(-time.Hour).Truncate(time.Second))
	busy := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
	if _, err := TriggerRun(ctx, b.pool, b.river, b.project, busy.ID); err != nil {
		t.Fatal(err)
	}
	b.dueAt(t, busy.ID, time.Now().Add(-time.Second))
	pending := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
	b.dueAt(t, pending.ID, time.Now().Add(-time.Second))

	c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river, Metrics: m, BatchSize: 2})
	if n, err := c.ClaimOnce(ctx); n != 2 || err != nil {
		t.Fatalf("ClaimOnce = %d, %v", n, err)
	}
	if got := testutil.ToFloat64(m.skipped.WithLabelValues("missed")); got < 58 || got > 62 {
		t.Errorf("missed ticks = %v, want about 60", got)
	}
	if got := testutil.ToFloat64(m.skipped.WithLabelValues("overlap")); got != 1 {
		t.Errorf("overlap skips = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.runs.WithLabelValues(StatusQueued)); got != 1 {
		t.Errorf("queued runs = %v, want 1", got)
	}
	// The loop's round records the backlog: one task is still due.
	c.round(ctx, true)
	if got := testutil.ToFloat64(m.due); got != 0 {
		t.Errorf("due backlog after the round = %v, want 0 (the round claims it)", got)
	}
	families, err := reg.Gather()
	var due int
	if err != nil || len(families) != 9 {
		t.Errorf("%d metric families (%v), want 9", len(families), err)
	}
	due, _, err = DueStats(ctx, b.pool)
	if err != nil || due != 0 {
		t.Fatalf("DueStats = %d, %v", due, err)
	}
	b.dueAt(t, pending.ID, time.Now().Add(-time.Minute))
	due, until, err := DueStats(ctx, b.pool)
	if err != nil || due != 1 || until > -59*time.Second {
		t.Fatalf("DueStats = %d, %v, %v; want 1 due about a minute late", due, until, err)
	}
}

func TestStatusClass(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]string{
		0: "error", 99: "error", 200: "2xx", 204: "2xx", 301: "3xx", 404: "4xx", 410: "4xx", 500: "5xx", 599: "5xx", 600: "error",
	} {
		if got := statusClass(status); got != want {
			t.Errorf("statusClass(%d) = %q, want %q", status, got, want)
		}
	}
}

// The Announcer measures an ended attempt by its outcome (an interrupted
// one not at all) and a first attempt's start by its trigger.
func TestAnnounceMeasuresRuns(t *testing.T) {
	t.Parallel()
	m := NewMetrics(prometheus.NewRegistry())
	a := NewAnnouncer(AnnouncerOptions{Metrics: m})
	ended := func(action string, o Outcome) OwnedRun {
		o.Duration = time.Second
		return OwnedRun{Run: Run{Status: o.Status}, Ended: &EndedAttempt{Action: action, Outcome: o}}
	}
	a.Announce(context.Background(), ended(ActionWebhook, Outcome{Status: StatusSucceeded}))
	a.Announce(context.Background(), ended(ActionWebhook, Outcome{Status: StatusQueued}),
		ended(ActionWebhook, Outcome{Status: StatusQueued, Interrupted: true}), ended(ActionPublish, Outcome{Status: StatusFailed}))
	// A rescue's failed run is no attempt's outcome.
	a.Announce(context.Background(), OwnedRun{Run: Run{Status: StatusFailed}})
	for _, tc := range []struct {
		action, outcome string
		want            uint64
	}{
		{ActionWebhook, OutcomeSucceeded, 1}, {ActionWebhook, OutcomeRetried, 1},
		{ActionWebhook, OutcomeFailed, 0}, {ActionPublish, OutcomeFailed, 1},
	} {
		if got := histogramCount(t, m.duration.WithLabelValues(tc.action, tc.outcome)); got != tc.want {
			t.Errorf("%s %s: %d observations, want %d (an interrupted attempt is not one)", tc.action, tc.outcome, got, tc.want)
		}
	}

	tick := time.Now().Add(-time.Minute)
	started := func(trigger string, attempt int) OwnedRun {
		now := time.Now()
		return OwnedRun{Run: Run{Status: StatusRunning, Trigger: trigger, Attempt: attempt, ScheduledFor: tick, StartedAt: &now}}
	}
	a.Announce(context.Background(), started(TriggerSchedule, 1))
	a.Announce(context.Background(), started(TriggerManual, 1), started(TriggerManual, 2))
	for trigger, want := range map[string]uint64{TriggerSchedule: 1, TriggerManual: 1} {
		if got := histogramCount(t, m.queueWait.WithLabelValues(trigger)); got != want {
			t.Errorf("queue wait of %s: %d observations, want %d (only a first attempt's start)", trigger, got, want)
		}
	}
	if got := histogramCount(t, m.lag); got != 1 {
		t.Errorf("due lag: %d observations, want 1 (the tick's)", got)
	}
}

func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var pb dto.Metric
	if err := o.(prometheus.Metric).Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleCount()
}
