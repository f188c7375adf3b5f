package dbtest

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard/switchboard/infra/db"
)

// CountingDB counts the round trips made through it: every Begin, Exec,
// Query and QueryRow (a transaction's own statements go through the
// transaction and are not counted; its Begin is). Tests of "one statement"
// promises wrap a pool in it.
type CountingDB struct {
	db.DB
	n atomic.Int64
}

// Count is how many round trips went through so far.
func (c *CountingDB) Count() int64 { return c.n.Load() }

// Reset sets the count back to zero.
func (c *CountingDB) Reset() { c.n.Store(0) }

func (c *CountingDB) Begin(ctx context.Context) (pgx.Tx, error) {
	c.n.Add(1)
	return c.DB.Begin(ctx)
}

func (c *CountingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.n.Add(1)
	return c.DB.Exec(ctx, sql, args...)
}

func (c *CountingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.n.Add(1)
	return c.DB.Query(ctx, sql, args...)
}

func (c *CountingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n.Add(1)
	return c.DB.QueryRow(ctx, sql, args...)
}
