// Package db owns the Postgres connection pool and the small interface
// handlers and workers take, so tests can hand them a transaction.
package db

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is satisfied by *pgxpool.Pool and pgx.Tx.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ DB = (*pgxpool.Pool)(nil)
	_ DB = pgx.Tx(nil)
)

// defaultMaxConns applies unless the URL sets pool_max_conns.
const defaultMaxConns = 25

// Options tune the pool; zero values mean pgx's defaults.
type Options struct {
	MaxConns int32
	// TransactionPooled: the URL is a transaction-mode pooler (PgBouncer
	// pool_mode=transaction), where consecutive statements of one client
	// connection run on different server sessions.
	TransactionPooled bool
}

// TransactionPooledExecMode is how queries run through a transaction-mode
// pooler. pgx's default (QueryExecModeCacheStatement) prepares named
// statements on one server session and executes them later, perhaps on
// another: "prepared statement stmtcache_… does not exist" on PgBouncer
// before 1.21 (Debian's 1.18) and wherever max_prepared_statements is 0.
// CacheDescribe caches only the statement's description on the client and
// sends each execution as one unnamed Parse/Bind/Execute/Sync, which a
// pooler keeps on one server session; parameters and results keep their
// binary formats and server-inferred types, so every query behaves as on a
// direct connection (QueryExecModeExec would send text parameters typed by
// their Go type: a []byte for a jsonb column would arrive as bytea). The
// cost is one extra round trip per distinct query per client connection;
// the cached description goes stale only if a migration changes a query's
// result columns under a running process.
const TransactionPooledExecMode = pgx.QueryExecModeCacheDescribe

// defaultConnectTimeout bounds a new connection (TCP, TLS, authentication)
// when the URL sets no connect_timeout.
const defaultConnectTimeout = 5 * time.Second

// Connect opens a pool and checks the database answers. A connection
// attempt takes at most the URL's connect_timeout, else
// defaultConnectTimeout.
func Connect(ctx context.Context, url string, opts Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(url, "pool_max_conns"):
		// pgx's default (max(4, cores)) is too small for a replica whose
		// requests, rate limits, River and claim loop share the pool.
		cfg.MaxConns = defaultMaxConns
	}
	if opts.TransactionPooled && !strings.Contains(url, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = TransactionPooledExecMode
	}
	if !strings.Contains(url, "connect_timeout") {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	cfg.HealthCheckPeriod = 5 * time.Second
	pings := new(atomic.Int64)
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		if p.IdleDuration <= PingIdleAfter {
			return false
		}
		pings.Add(1)
		return true
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	key := weak.Make(pool)
	poolPings.Store(key, pings)
	runtime.AddCleanup(pool, func(k weak.Pointer[pgxpool.Pool]) { poolPings.Delete(k) }, key)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return pool, nil
}

// PingIdleAfter: a connection idle for longer is pinged (a round trip)
// before the pool hands it out, so one the server closed meanwhile is
// replaced rather than failing a statement. pgx's default is a second,
// which made most statements of an idle replica two round trips: the pool
// hands its idle connections out in turn, so with a heartbeat every 2 s
// and a few connections each had been idle for several seconds. A
// connection the server closed less than 10 s after its last use fails
// its next statement once (the pool then drops it), as one closed within
// the second did before; after a restart or failover that is a few
// statements, which the run worker's writes retry (RetryTransient).
const PingIdleAfter = 10 * time.Second

// poolPings counts each Connect pool's pings (Pings), forgotten with the
// pool.
var poolPings sync.Map // weak.Pointer[pgxpool.Pool] → *atomic.Int64

// Pings is how many connections pool pinged before handing them out (a
// pool Connect did not open: 0).
func Pings(pool *pgxpool.Pool) int64 {
	if c, ok := poolPings.Load(weak.Make(pool)); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

// Package errors the data layer translates Postgres errors into.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	// ErrInvalidText is a value Postgres cannot store as text, json or
	// jsonb (a NUL, a lone UTF-16 surrogate) or cannot read as its type:
	// bad input that got past validation, never a server fault.
	ErrInvalidText = errors.New("invalid text")
)

// invalidTextCodes are the SQLSTATEs of values the database refuses.
var invalidTextCodes = []string{
	pgerrcode.CharacterNotInRepertoire,  // 22021: NUL in text
	pgerrcode.UntranslatableCharacter,   // 22P05: \u0000 in jsonb
	pgerrcode.InvalidTextRepresentation, // 22P02: bad json, uuid or number syntax
}

// Translate maps pgx.ErrNoRows to ErrNotFound, unique violations to
// ErrConflict and refused values to ErrInvalidText, keeping the original
// error in the chain.
func Translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	if pgErr != nil && slices.Contains(invalidTextCodes, pgErr.Code) {
		return fmt.Errorf("%w: %w", ErrInvalidText, err)
	}
	return err
}
