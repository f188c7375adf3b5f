package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-chi/httprate"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the counter needs of Postgres; *pgxpool.Pool and pgx.Tx have it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Counter keeps sliding-window counts in the rate_limit_counters table, so
// every replica counts against the same numbers. Take decides a request in
// one statement; the httprate.LimitCounter methods let it back httprate's
// own limiter too (which serialises a process, see web/ratelimit.go).
type Counter struct {
	db      DB
	timeout time.Duration
}

var _ httprate.LimitCounter = (*Counter)(nil)

// NewCounter returns a counter on db. Calls through httprate's interface,
// which carries no context, give up after timeout (default 250 ms).
func NewCounter(db DB, timeout time.Duration) *Counter {
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	return &Counter{db: db, timeout: timeout}
}

// takeSQL decides n requests for a key in one round trip. It reads the
// previous window and adds n to the current one only if httprate's test
// passes: round(prev*weight + curr) + n <= limit (floor(x+0.5) is Go's
// math.Round for x >= 0). Refused requests are not counted, as in httprate.
// Why it is safe under concurrency: ON CONFLICT locks the key's row and
// evaluates its WHERE on the latest committed count, so concurrent decisions
// on one key queue on that row for the length of one statement and can never
// overshoot; decisions on different keys never wait for each other. The
// INSERT's own WHERE assumes an empty current window, which is only less
// strict than the conflict check, so a request refused there would be
// refused anyway. cur is the statement's snapshot, used only to report
// counts when nothing was taken.
const takeSQL = `
WITH prev AS (
    SELECT coalesce(sum(count), 0)::int AS count
    FROM rate_limit_counters WHERE key = @key AND window_start = @previous
), cur AS (
    SELECT coalesce(sum(count), 0)::int AS count
    FROM rate_limit_counters WHERE key = @key AND window_start = @current
), taken AS (
    INSERT INTO rate_limit_counters AS c (key, window_start, count)
    SELECT @key, @current, @n::int FROM prev
    WHERE floor(prev.count * @weight::float8 + 0.5) + @n::int <= @limit::int
    ON CONFLICT (key, window_start) DO UPDATE SET count = c.count + excluded.count
    WHERE floor((SELECT count FROM prev) * @weight::float8 + c.count + 0.5) + excluded.count <= @limit::int
    RETURNING c.count
)
SELECT prev.count, cur.count, (SELECT count FROM taken) FROM prev, cur`

// taken is the outcome of one decision: the counts before it, and whether
// the requests were counted.
type taken struct {
	prev, curr int
	ok         bool
}

func (c *Counter) take(ctx context.Context, key string, s slot, limit, n int) (taken, error) {
	if c.db == nil {
		return taken{}, errors.New("rate limit counter: no database")
	}
	var t taken
	var after *int
	err := c.db.QueryRow(ctx, takeSQL, pgx.NamedArgs{
		"key": key, "current": s.current, "previous": s.previous,
		"weight": s.weight, "n": n, "limit": limit,
	}).Scan(&t.prev, &t.curr, &after)
	if err != nil {
		return taken{}, fmt.Errorf("rate limit counter: %w", err)
	}
	if after != nil {
		t.ok, t.curr = true, *after-n
	}
	return t, nil
}

// Config is part of httprate.LimitCounter; windows come with every call.
func (c *Counter) Config(requestLimit int, windowLength time.Duration) {}

// Increment adds one request to key's window.
func (c *Counter) Increment(key string, currentWindow time.Time) error {
	return c.IncrementBy(key, currentWindow, 1)
}

// IncrementBy adds amount requests to key's window.
func (c *Counter) IncrementBy(key string, currentWindow time.Time, amount int) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	_, err := c.db.Exec(ctx, `
INSERT INTO rate_limit_counters AS c (key, window_start, count) VALUES (@key, @window, @n)
ON CONFLICT (key, window_start) DO UPDATE SET count = c.count + excluded.count`,
		pgx.NamedArgs{"key": key, "window": currentWindow.UTC(), "n": amount})
	if err != nil {
		return fmt.Errorf("rate limit counter: increment: %w", err)
	}
	return nil
}

// Get returns key's counts in the current and the previous window.
func (c *Counter) Get(key string, currentWindow, previousWindow time.Time) (curr, prev int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	err = c.db.QueryRow(ctx, `
SELECT coalesce(sum(count) FILTER (WHERE window_start = @current), 0)::int,
       coalesce(sum(count) FILTER (WHERE window_start = @previous), 0)::int
FROM rate_limit_counters WHERE key = @key AND window_start IN (@current, @previous)`,
		pgx.NamedArgs{"key": key, "current": currentWindow.UTC(), "previous": previousWindow.UTC()}).Scan(&curr, &prev)
	if err != nil {
		return 0, 0, fmt.Errorf("rate limit counter: get: %w", err)
	}
	return curr, prev, nil
}

// Prune deletes windows that started before before; run it periodically
// with a cutoff of Retention ago.
func Prune(ctx context.Context, db DB, before time.Time) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM rate_limit_counters WHERE window_start < @before`, pgx.NamedArgs{"before": before})
	if err != nil {
		return 0, fmt.Errorf("prune rate limit windows: %w", err)
	}
	return tag.RowsAffected(), nil
}
