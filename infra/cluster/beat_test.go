package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// TestBeatIsOneStatement: a heartbeat that may rescue refreshes the node and
// finds the expired ones in one round trip, and never finds itself.
func TestBeatIsOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	counted := &dbtest.CountingDB{DB: pool}
	hook := &rescueHook{dead: map[string]bool{}}
	c := New(Options{DB: counted, NodeID: uuid.NewString(), Secret: testSecret, RescueJobs: hook.rescue, ExpireAfter: time.Second})
	ghost := Node{ID: uuid.NewString(), Name: "ghost", Roles: []string{"worker"}, Version: "test", StartedAt: time.Now()}
	if err := nodeUpsert(ctx, pool, ghost); err != nil {
		t.Fatal(err)
	}
	// Both rows are stale, this node's as after a pause longer than the
	// expiry; it has beaten without a break for long enough to rescue.
	if err := nodeUpsert(ctx, pool, c.self()); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE cluster_nodes SET heartbeat_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	c.healthySince.Store(new(time.Now().Add(-time.Hour)))
	if err := c.beat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counted.Count(); got != 1 {
		t.Fatalf("a beat took %d round trips, want 1", got)
	}
	if !hook.saw(ghost.ID) || hook.saw(c.NodeID()) {
		t.Fatalf("rescued %v: want the ghost and not this node", hook.dead)
	}
	if n, ok := nodeRow(t, pool, c.NodeID()); !ok || n.HeartbeatAge > time.Minute {
		t.Fatalf("the beat did not refresh this node: %+v", n)
	}
}
