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

	"github.com/switchboard/switchboard/infra/dbtest"
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

// TestRiverUICountsAgainRightAfterAnIdleStop: a request just after the
// idle stop starts the background counts again. (A River UI handler
// whose services are still stopping ignores Start: reusing it left the
// counts off for another idle period.) River UI's first count comes about
// 10 s after its start, so this test takes that long.
func TestRiverUICountsAgainRightAfterAnIdleStop(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	client, err := river.NewClient[pgx.Tx](riverpgxv5.New(pool), &river.Config{Logger: dbtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	counts := &cachedCounts{}
	logger := slog.New(counts)
	builds := 0
	u, err := newLazyRiverUI(func() (*riverui.Handler, error) {
		builds++
		return riverui.NewHandler(&riverui.HandlerOpts{Endpoints: riverui.NewEndpoints(client, nil), Logger: logger, Prefix: "/riverui"})
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Stop(context.Background()) })
	u.used()
	u.idleStop()
	u.used() // at once: the first handler's services are still stopping
	deadline := time.Now().Add(20 * time.Second)
	for counts.n.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no background count within 20 s of the second use (%d handlers built)", builds)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if builds != 2 {
		t.Fatalf("%d handlers built for two periods of use, want 2", builds)
	}
}
