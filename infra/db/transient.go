package db

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// transientCodes are SQLSTATEs outside class 08 (connection exception)
// that say the server could not take the statement now, not that the
// statement is wrong: the same statement succeeds once the database is back
// (or, for the last two, when it runs again).
var transientCodes = []string{
	pgerrcode.AdminShutdown,          // 57P01: the server is stopping (a switchover)
	pgerrcode.CrashShutdown,          // 57P02
	pgerrcode.CannotConnectNow,       // 57P03: starting up, or a standby being promoted
	pgerrcode.IdleSessionTimeout,     // 57P05
	pgerrcode.TooManyConnections,     // 53300
	pgerrcode.ReadOnlySQLTransaction, // 25006: the address still leads to a demoted primary
	pgerrcode.SerializationFailure,   // 40001
	pgerrcode.DeadlockDetected,       // 40P01
}

// Transient reports whether err is the database being unreachable or
// unavailable for a while (a lost connection, a refused login, a server
// shutting down or a standby not yet promoted, PgBouncer refusing clients
// while its server logins fail: it reports those as SQLSTATE 08P01), as
// opposed to the statement failing on its own. A statement that failed
// transiently is worth repeating if it is idempotent.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	// A connection that could not be made, a connect timeout too (pgx
	// wraps its context.DeadlineExceeded in the ConnectError).
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	// Any other deadline is the caller's own (context.DeadlineExceeded is
	// also a net.Error).
	if errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || slices.Contains(transientCodes, pgErr.Code)
	}
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) ||
		// pgx's error for a statement on a connection that broke earlier.
		strings.Contains(err.Error(), "conn closed")
}

// RetryTransient runs fn until it returns nil or an error that is not
// Transient, waiting about 100 ms after the first failure and twice as long
// after each next one (at most 2 s; each wait drawn from its upper half, so
// the workers an outage stopped together do not all retry at one instant),
// for at most within in all; it also gives up
// when stop is done. It returns fn's last error. fn must be idempotent: a
// statement whose commit was acknowledged on a connection that then broke
// runs again.
func RetryTransient(stop context.Context, within time.Duration, fn func() error) error {
	deadline := time.Now().Add(within)
	wait := 100 * time.Millisecond
	for {
		err := fn()
		sleep := wait/2 + rand.N(wait/2+1)
		if err == nil || !Transient(err) || stop.Err() != nil || time.Now().Add(sleep).After(deadline) {
			return err
		}
		t := time.NewTimer(sleep)
		select {
		case <-stop.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}
