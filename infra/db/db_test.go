package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// A pool Connect opens pings a connection before handing it out only
// when it was idle for over PingIdleAfter (pgx's default is a second,
// which doubled an idle replica's heartbeat round trips), and counts the
// pings.
func TestConnectPingsOnlyLongIdleConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.Connect(ctx, dbtest.NewDatabaseURL(t), db.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	should := pool.Config().ShouldPing
	before := db.Pings(pool)
	if should(ctx, pgxpool.ShouldPingParams{IdleDuration: 6 * time.Second}) {
		t.Fatal("a connection idle for 6 s (a heartbeat's, with three connections taking turns) is pinged")
	}
	if !should(ctx, pgxpool.ShouldPingParams{IdleDuration: db.PingIdleAfter + time.Millisecond}) {
		t.Fatalf("a connection idle for over %s is not pinged", db.PingIdleAfter)
	}
	if got := db.Pings(pool) - before; got != 1 {
		t.Fatalf("%d pings counted, want 1", got)
	}
	other := dbtest.NewPool(t)
	if db.Pings(other) != 0 {
		t.Fatal("a second pool counts the first pool's pings")
	}
}
