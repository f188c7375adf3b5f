package main

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// cachedCounts counts River UI's "ran query and cached result" debug
// records: its background counts at work.
type cachedCounts struct{ n atomic.Int64 }

func (c *cachedCounts) Enabled(context.Context, slog.Level) bool { return true }
func (c *cachedCounts) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "Ran query and cached result") {
		c.n.Add(1)
	}
	return nil
}
func (c *cachedCounts) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *cachedCounts) WithGroup(string) slog.Handler      { return c }

// newTestRiverUI is a lazyRiverUI over a River client on a test database,
// counting the handlers it builds.
func newTestRiverUI(t *testing.T, logger *slog.Logger) (*lazyRiverUI, *int) {
	pool := dbtest.NewPool(t)
	client, err := river.NewClient[pgx.Tx](riverpgxv5.New(pool), &river.Config{Logger: dbtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	builds := new(int)
	u, err := newLazyRiverUI(func() (*riverui.Handler, error) {
		*builds++
		return riverui.NewHandler(&riverui.HandlerOpts{Endpoints: riverui.NewEndpoints(client, nil), Logger: logger, Prefix: "/riverui"})
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Stop(context.Background()) })
	return u, builds
}

// TestRiverUICountsAgainRightAfterAnIdleStop: a request just after the
// idle stop starts the background counts again. (A River UI handler
// whose services are still stopping ignores Start: reusing it left the
// counts off for another idle period.) River UI's first count comes about
// 10 s after its start, so this test takes that long.
func TestRiverUICountsAgainRightAfterAnIdleStop(t *testing.T) {
	t.Parallel()
	counts := &cachedCounts{}
	u, builds := newTestRiverUI(t, slog.New(counts))
	u.mu.Lock()
	u.idle = time.Millisecond
	u.mu.Unlock()
	u.used()
	testwait.For(t, 10*time.Second, "the idle stop", func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		stopped := u.cancel == nil
		if stopped {
			u.idle = time.Minute
		}
		return stopped
	})
	u.used() // at once: the first handler's services are still stopping
	testwait.For(t, 20*time.Second, "a background count after the second use", func() bool { return counts.n.Load() > 0 })
	if *builds != 2 {
		t.Fatalf("%d handlers built for two periods of use, want 2", *builds)
	}
}

// TestRiverUIStopTimerAfterAUse: a stop timer that fired while a request
// was pushing the stop later (it waited for the lock, then the request
// Reset it: it fires again) stops nothing; a timer of an earlier period
// stops nothing either.
func TestRiverUIStopTimerAfterAUse(t *testing.T) {
	t.Parallel()
	u, _ := newTestRiverUI(t, dbtest.Logger(t))
	u.used()
	u.mu.Lock()
	period := u.period
	u.mu.Unlock()
	u.idleStop(period) // as if fired just before that use took the lock
	u.idleStop(period - 1)
	u.mu.Lock()
	running := u.cancel != nil
	u.mu.Unlock()
	if !running {
		t.Fatal("a stop timer that fired during a use stopped the background counts")
	}
}
