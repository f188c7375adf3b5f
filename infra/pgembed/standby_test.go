package pgembed

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestStandbyPromotedAfterPrimaryStops: a standby started from the
// primary holds, once the primary has stopped cleanly (right after
// StartStandby returned) and it is promoted, every commit the primary made
// while the standby was being made and started, and takes writes.
func TestStandbyPromotedAfterPrimaryStops(t *testing.T) {
	t.Parallel()
	if FindBinDir() == "" {
		t.Skip("no PostgreSQL binaries installed")
	}
	ctx := context.Background()
	primary, err := Start(ctx, Options{Dir: t.TempDir(), Ephemeral: true})
	if err != nil {
		t.Fatalf("start primary: %v", err)
	}
	t.Cleanup(func() { _ = primary.Stop() })
	mustExec(t, primary.URL(), "CREATE TABLE ticks (n int)")
	// Commits go on while the standby is made and starts, and stop only
	// when StartStandby returns; the primary stops right after.
	writer, err := pgx.Connect(ctx, primary.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(context.Background())
	stop, committed := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				committed <- n
				return
			default:
			}
			if _, err := writer.Exec(ctx, "INSERT INTO ticks VALUES ($1)", n+1); err == nil {
				n++
			}
		}
	}()
	standby, err := StartStandby(ctx, primary, Options{Dir: t.TempDir(), Ephemeral: true})
	close(stop)
	want := <-committed
	if err != nil {
		t.Fatalf("start standby: %v", err)
	}
	t.Cleanup(func() { _ = standby.Stop() })
	// Only a standby the primary streams to is sure to get every commit
	// from a clean shutdown: one still connecting gets none of them.
	var streaming bool
	if err := writer.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE state = 'streaming')`).Scan(&streaming); err != nil || !streaming {
		t.Fatalf("StartStandby returned before the primary streamed to it (%v)", err)
	}
	if err := primary.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, standby.URL(), "INSERT INTO ticks VALUES (0)")
	conn, err := pgx.Connect(ctx, standby.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM ticks").Scan(&n); err != nil || n != want+1 {
		t.Fatalf("promoted standby holds %d rows (%v), want the primary's %d and its own", n, err, want)
	}
}
