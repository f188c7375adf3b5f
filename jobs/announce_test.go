package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// gatePublisher answers no publish until want of them wait at once (or
// gives up after a while and fails them): it tells publishes made one
// after another from publishes that wait together. It fails the run whose
// id is refuse.
type gatePublisher struct {
	want   int
	refuse string
	giveUp <-chan struct{} // closed: every publish still waiting fails
	mu     sync.Mutex
	seen   []string
	all    chan struct{}
}

func (g *gatePublisher) PublishProject(_ context.Context, user, event string, payload any) error {
	run := payload.(Run)
	g.mu.Lock()
	g.seen = append(g.seen, user+" "+event+" "+run.ID)
	if len(g.seen) == g.want {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-g.giveUp:
		return errors.New("published alone: the others never came")
	}
	if run.ID == g.refuse {
		return errors.New("refused")
	}
	return nil
}

func TestAnnounce(t *testing.T) {
	const n = 50
	giveUp, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pub := &gatePublisher{want: n, refuse: "run-7", giveUp: giveUp.Done(), all: make(chan struct{})}
	runs := make([]OwnedRun, n)
	var want []string
	for i := range runs {
		runs[i] = OwnedRun{Run: Run{ID: fmt.Sprintf("run-%d", i), Status: StatusQueued}, ProjectID: fmt.Sprintf("project-%d", i%3)}
		want = append(want, fmt.Sprintf("project-%d task.run.queued run-%d", i%3, i))
	}
	var logs bytes.Buffer
	NewAnnouncer(AnnouncerOptions{Publisher: pub, Logger: slog.New(slog.NewTextHandler(&logs, nil))}).Announce(context.Background(), runs...)
	// Every publish was answered before Announce returned.
	slices.Sort(want)
	slices.Sort(pub.seen)
	if !slices.Equal(pub.seen, want) {
		t.Fatalf("published %d: %v", len(pub.seen), pub.seen)
	}
	if got := strings.Count(logs.String(), "publish run event"); got != 1 || !strings.Contains(logs.String(), "run_id=run-7") {
		t.Fatalf("logged %d warnings, want the refused run's only:\n%s", got, logs.String())
	}
	NewAnnouncer(AnnouncerOptions{}).Announce(context.Background(), runs...) // no publisher: nothing
	var none *Announcer
	none.Announce(context.Background(), runs...) // none: nothing
}

type panicPublisher struct{ calls atomic.Int32 }

func (p *panicPublisher) PublishProject(context.Context, string, string, any) error {
	if p.calls.Add(1) == 2 {
		panic("publisher bug")
	}
	return nil
}

// A publisher's panic reaches the caller (whose recover, the maintenance
// loop's, turns it into a failed run) once the other publishes are done.
func TestAnnouncePanicReachesTheCaller(t *testing.T) {
	pub := &panicPublisher{}
	runs := make([]OwnedRun, 5)
	defer func() {
		if v := recover(); v != "publisher bug" {
			t.Fatalf("recovered %v, want the publisher's panic", v)
		}
		if n := pub.calls.Load(); n != 5 {
			t.Fatalf("%d publishes made, want all 5", n)
		}
	}()
	NewAnnouncer(AnnouncerOptions{Publisher: pub}).Announce(context.Background(), runs...)
}

// Every run announced is counted once by its new status, published or not.
func TestAnnounceCounts(t *testing.T) {
	t.Parallel()
	m := NewMetrics(prometheus.NewRegistry())
	a := NewAnnouncer(AnnouncerOptions{Metrics: m})
	a.Announce(context.Background(), OwnedRun{Run: Run{Status: StatusQueued}}, OwnedRun{Run: Run{Status: StatusCancelled}},
		OwnedRun{Run: Run{Status: StatusQueued}})
	a.Announce(context.Background(), OwnedRun{Run: Run{Status: StatusSucceeded}})
	for status, want := range map[string]float64{StatusQueued: 2, StatusCancelled: 1, StatusSucceeded: 1, StatusRunning: 0} {
		if got := testutil.ToFloat64(m.runs.WithLabelValues(status)); got != want {
			t.Errorf("%s counted %v times, want %v", status, got, want)
		}
	}
}
