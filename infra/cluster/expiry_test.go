package cluster

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
)

// queryCounter is a real database whose Query calls are counted.
type queryCounter struct {
	db.DB
	queries atomic.Int64
}

func (q *queryCounter) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	q.queries.Add(1)
	return q.DB.Query(ctx, sql, args...)
}

// DeadNodes answers from the last heartbeat, which read every other node
// in its own statement: while every node beats, asking costs no round
// trip; a node that stops beating is still judged dead (the database is
// asked once its time is up).
func TestDeadNodesFromTheHeartbeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	counted := &queryCounter{DB: pool}
	opts := func(q db.DB) Options {
		return Options{DB: q, NodeID: uuid.NewString(), Secret: testSecret, Addr: func() string { return "127.0.0.1:1" },
			HeartbeatEvery: 100 * time.Millisecond, ExpireAfter: time.Second}
	}
	watcher, dying := New(opts(counted)), New(opts(pool))
	for _, c := range []*Cluster{watcher, dying} {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
	}
	testwait.For(t, 10*time.Second, "the watcher to judge nodes", watcher.mayRescue)

	before, asked := counted.queries.Load(), time.Now()
	for range 200 {
		dead, next, err := watcher.DeadNodes(ctx)
		if err != nil || len(dead) != 0 || next <= 0 || next > 2*time.Second {
			t.Fatalf("DeadNodes: %v, %s, %v; want none dead and a wait within the next expiry", dead, next, err)
		}
	}
	// Only heartbeats ran statements meanwhile (one per 100 ms).
	if got, beats := counted.queries.Load()-before, int64(time.Since(asked)/(100*time.Millisecond))+2; got > beats {
		t.Fatalf("%d statements during 200 DeadNodes calls, at most %d heartbeats", got, beats)
	}

	dying.StopHeartbeat()
	testwait.For(t, 10*time.Second, "the silent node to be judged dead", func() bool {
		dead, _, err := watcher.DeadNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(dead, dying.NodeID())
	})
}
