package jobs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard/switchboard/infra/db"
)

// countingDB counts the round trips made through it (a transaction's
// statements go through the transaction and are not counted, its Begin is).
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

func TestIdleRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("nothing due: one statement, no claim transaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		later := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		b.dueAt(t, later.ID, time.Now().Add(time.Hour))
		counted := &countingDB{DB: b.pool}
		c := NewClaimer(ClaimerOptions{DB: counted, River: b.river})
		wait, claim := c.round(ctx, false)
		if n := counted.n.Load(); n != 1 || wait != c.opts.MaxSleep || claim {
			t.Fatalf("idle round: %d round trips, sleep %v, claim next %v; want 1, %v, false", n, wait, claim, c.opts.MaxSleep)
		}
	})
	t.Run("a tick due within MaxSleep is claimed when the loop wakes for it", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		soon := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		b.dueAt(t, soon.ID, time.Now().Add(300*time.Millisecond))
		c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
		wait, claim := c.round(ctx, false)
		if !claim || wait > 302*time.Millisecond || wait <= 0 {
			t.Fatalf("round before the tick: sleep %v, claim next %v", wait, claim)
		}
	})
	t.Run("a due tick found by the question is claimed in the same round", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		due := b.task(t, func(t *Task) { t.Schedule = new("@every 1h") })
		b.dueAt(t, due.ID, time.Now().Add(-time.Second))
		c := NewClaimer(ClaimerOptions{DB: b.pool, River: b.river})
		c.round(ctx, false)
		if runs := b.runs(t, due.ID); len(runs) != 1 {
			t.Fatalf("%d runs after the round, want 1", len(runs))
		}
	})
}
