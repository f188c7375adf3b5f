// Package quota owns the quotas of a project: their names, defaults and
// kinds, the error that names an exceeded one, and the transaction-scoped
// lock under which a create counts what its project already uses. A quota
// is counted from the rows themselves, in the creating transaction, never
// in memory: two replicas creating a project's last task at once take the
// same lock, so the second counts the first's task and is refused.
package quota

import (
	"cmp"
	"context"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
)

// Name names a quota in answers and settings.
type Name string

// The quotas of a project (docs/api.md "Quotas").
const (
	// Tasks is the project's tasks, scheduled and on-demand.
	Tasks Name = "tasks"
	// Rooms is the rooms the project created.
	Rooms Name = "rooms"
	// APIKeys is the project's API keys.
	APIKeys Name = "api_keys"
	// QueuedRuns is the project's runs not yet final: queued, waiting for
	// run_at or a retry, or running.
	QueuedRuns Name = "queued_runs"
	// BackfillTicks is the project's backfilled runs not yet final.
	BackfillTicks Name = "backfill_ticks"
)

// Limits are the quotas of every project; a zero field means its default.
type Limits struct {
	Tasks, Rooms, APIKeys, QueuedRuns, BackfillTicks int
}

// Defaults are the quotas when nothing is configured.
var Defaults = Limits{Tasks: 1000, Rooms: 100, APIKeys: 100, QueuedRuns: 5000, BackfillTicks: 1000}

// OrDefaults returns l with each zero field set to its default.
func (l Limits) OrDefaults() Limits {
	return Limits{
		Tasks: cmp.Or(l.Tasks, Defaults.Tasks), Rooms: cmp.Or(l.Rooms, Defaults.Rooms),
		APIKeys: cmp.Or(l.APIKeys, Defaults.APIKeys), QueuedRuns: cmp.Or(l.QueuedRuns, Defaults.QueuedRuns),
		BackfillTicks: cmp.Or(l.BackfillTicks, Defaults.BackfillTicks),
	}
}

// ExceededError is a create refused because it would take its project
// past a quota; nothing was changed.
type ExceededError struct {
	Quota Name
	Limit int // the quota
	Used  int // what the project used before the refused create
	Asked int // what the create would have added
}

func (e *ExceededError) Error() string {
	return fmt.Sprintf("quota %s exceeded: the project uses %d of %d and this would add %d", e.Quota, e.Used, e.Limit, e.Asked)
}

// Status is the HTTP status of the refusal: 429 for quotas that free up
// by themselves as runs finish (try again later), 409 for counts of things
// that stay until someone deletes them.
func (e *ExceededError) Status() int {
	if e.Quota == QueuedRuns || e.Quota == BackfillTicks {
		return http.StatusTooManyRequests
	}
	return http.StatusConflict
}

// Check returns an ExceededError when used plus asked is over limit.
func Check(q Name, limit, used, asked int) error {
	if used+asked > limit {
		return &ExceededError{Quota: q, Limit: limit, Used: used, Asked: asked}
	}
	return nil
}

// lockSpace is the first key of the quota locks (pg_advisory_xact_lock's
// two-key form), so they cannot collide with other advisory locks.
const lockSpace = 0x5b0a7a

// Count takes quota q's lock of the project for the rest of tx, then runs
// countSQL ($1: the project id) and returns its one integer: the use no
// other transaction can change before tx ends without waiting for it. One
// round trip: the lock and the count are sent as one batch, and the count,
// a statement of its own, reads a snapshot taken once the lock is held, so
// it sees everything the lock's previous holder committed.
func Count(ctx context.Context, tx pgx.Tx, q Name, projectID, countSQL string) (int, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1, hashtext($2 || ':' || $3))`, lockSpace, string(q), projectID)
	b.Queue(countSQL, projectID)
	res := tx.SendBatch(ctx, b)
	defer func() { _ = res.Close() }()
	if _, err := res.Exec(); err != nil {
		return 0, fmt.Errorf("quota %s: lock: %w", q, err)
	}
	var n int
	if err := res.QueryRow().Scan(&n); err != nil {
		return 0, fmt.Errorf("quota %s: count: %w", q, err)
	}
	return n, res.Close()
}

// Take is Count followed by Check: it returns an ExceededError when the
// project's use of q plus asked is over limit, and holds the lock either
// way until tx ends.
func Take(ctx context.Context, tx pgx.Tx, q Name, limit int, projectID, countSQL string, asked int) error {
	used, err := Count(ctx, tx, q, projectID, countSQL)
	if err != nil {
		return err
	}
	return Check(q, limit, used, asked)
}
