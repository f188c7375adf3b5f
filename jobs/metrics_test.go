package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
	if err != nil || len(families) != 6 {
		t.Errorf("%d metric families (%v), want 6", len(families), err)
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
