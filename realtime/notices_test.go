package realtime

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/startstoptest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// A bus without a hub (a worker-only replica) with notices LISTENs on
// their channels: a NOTIFY from another connection calls the handler, and
// so do LISTEN coming up and going down (a notice may have been missed).
func TestBusNotices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(t)
	pool, err := db.Connect(ctx, dbURL, db.Options{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	t.Run("a notification, LISTEN up and LISTEN lost ring the handler", func(t *testing.T) {
		t.Parallel()
		var rang atomic.Int64
		bus := NewBus(BusOptions{Pool: pool, Notices: map[string]func(){"test_notice": func() { rang.Add(1) }}})
		if err := bus.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bus.Stop)
		testwait.For(t, 5*time.Second, "LISTEN up and its ring", func() bool { return bus.Listening() && rang.Load() == 1 })
		if _, err := pool.Exec(ctx, `SELECT pg_notify('test_notice', '')`); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 5*time.Second, "the notification's ring", func() bool { return rang.Load() == 2 })
		if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, bus.ListenApplicationName()); err != nil {
			t.Fatal(err)
		}
		// Lost (a ring), back (another ring).
		testwait.For(t, 10*time.Second, "the rings of LISTEN lost and back", func() bool { return rang.Load() >= 4 && bus.Listening() })
	})
	t.Run("without a hub the bus's own channel is not heard", func(t *testing.T) {
		t.Parallel()
		var rang atomic.Int64
		bus := NewBus(BusOptions{Pool: pool, NodeID: "hubless", Notices: map[string]func(){"later_notice": func() { rang.Add(1) }}})
		if err := bus.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bus.Stop)
		testwait.For(t, 5*time.Second, "LISTEN up", bus.Listening)
		// An rpc result addressed to this node: a bus that heard its
		// channel would act on it (and count it). Notifications arrive in
		// commit order, so the later notice's ring comes after it.
		if _, err := pool.Exec(ctx, `SELECT pg_notify($1, '{"o":"elsewhere","n":1,"k":"r","d":"hubless","c":"x","f":{}}')`, Channel); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `SELECT pg_notify('later_notice', '')`); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 5*time.Second, "the later notice", func() bool { return rang.Load() == 2 })
		if n := counterValue(bus.metrics.received); n != 0 {
			t.Fatalf("a bus without a hub received %v bus messages", n)
		}
	})
	t.Run("poll-only: no LISTEN, not listening", func(t *testing.T) {
		t.Parallel()
		bus := NewBus(BusOptions{Pool: pool, PollOnly: true, Notices: map[string]func(){"test_notice": func() {}}})
		if err := bus.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bus.Stop)
		if bus.Listening() {
			t.Fatal("a poll-only bus says it is listening")
		}
	})
	t.Run("start and stop", func(t *testing.T) {
		t.Parallel()
		startstoptest.Stress(t, func(*testing.T) startstop.Service {
			return NewBus(BusOptions{Pool: pool, Notices: map[string]func(){"test_notice": func() {}}})
		})
	})
}
