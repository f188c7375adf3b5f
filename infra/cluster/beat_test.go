package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/dbtest"
)

// countingDB counts the round trips made through it.
type countingDB struct {
	db.DB
	n atomic.Int64
}

func (c *countingDB) Begin(ctx context.Context) (pgx.Tx, error) {
	c.n.Add(1)
	return c.DB.Begin(ctx)
}

func (c *countingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.n.Add(1)
	return c.DB.Exec(ctx, sql, args...)
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.n.Add(1)
	return c.DB.Query(ctx, sql, args...)
}

func (c *countingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}

// TestBeatIsOneStatement: a heartbeat that may rescue refreshes the node and
// finds the expired ones in one round trip, and never finds itself.
func TestBeatIsOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	counted := &countingDB{DB: pool}
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
	c.healthySince.Store(time.Now().Add(-time.Hour).UnixNano())
	if err := c.beat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counted.n.Load(); got != 1 {
		t.Fatalf("a beat took %d round trips, want 1", got)
	}
	if !hook.saw(ghost.ID) || hook.saw(c.NodeID()) {
		t.Fatalf("rescued %v: want the ghost and not this node", hook.dead)
	}
	if n, ok := nodeRow(t, pool, c.NodeID()); !ok || n.HeartbeatAge > time.Minute {
		t.Fatalf("the beat did not refresh this node: %+v", n)
	}
}
