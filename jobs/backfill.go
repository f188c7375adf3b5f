package jobs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/quota"
)

// Bounds of a backfill.
const (
	// MaxBackfillTicks is the most ticks one backfill may cover.
	MaxBackfillTicks = 1000
	// MaxBackfillSpan is the longest range one backfill may cover, and how
	// far back from now its start may reach.
	MaxBackfillSpan = 366 * 24 * time.Hour
)

// BackfillResult is what a backfill made.
type BackfillResult struct {
	Ticks   int   // ticks in the range
	Created []Run // runs made now; the others existed already
}

// Backfill creates one scheduled run per tick of the project's task in
// [from, to), in the task's time zone, in one transaction. Ticks that
// already have a run (claimed, or backfilled before) are left alone: the
// unique key on (task_id, scheduled_for) of scheduled runs makes a tick run
// once however often, and wherever, it is backfilled. Overlap skip and
// buffer_one do not apply (the ticks are asked for); max_concurrency and
// the one-at-a-time policies still limit how many run at once. The runs it
// makes count whole against the project's quotas: a backfill that would
// take the project past lim.BackfillTicks backfilled runs not yet final,
// or past lim.QueuedRuns runs not yet final, makes nothing and returns a
// quota.ExceededError.
func Backfill(ctx context.Context, q db.DB, client *river.Client[pgx.Tx], lim quota.Limits, projectID, taskID string, from, to time.Time) (BackfillResult, error) {
	if uuid.Validate(taskID) != nil {
		return BackfillResult{}, db.ErrNotFound
	}
	task, err := GetTask(ctx, q, projectID, taskID)
	if err != nil {
		return BackfillResult{}, err
	}
	ticks, err := backfillTicks(task, from, to, time.Now())
	if err != nil {
		return BackfillResult{}, err
	}
	tx, err := q.Begin(ctx)
	if err != nil {
		return BackfillResult{}, fmt.Errorf("backfill: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// why: lock the task first, as the claim does, so a claim inserting the
	// current tick and this backfill cannot wait on each other.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE`, taskID); err != nil {
		return BackfillResult{}, fmt.Errorf("backfill: lock task: %w", err)
	}
	used, err := backfillUse(ctx, tx, projectID)
	if err != nil {
		return BackfillResult{}, err
	}
	runs, err := insertBackfillRuns(ctx, tx, taskID, ticks)
	if err != nil {
		return BackfillResult{}, err
	}
	if err := used.check(lim.OrDefaults(), len(runs)); err != nil {
		return BackfillResult{}, err
	}
	params := make([]river.InsertManyParams, len(runs))
	for i, r := range runs {
		params[i] = river.InsertManyParams{Args: RunArgs{RunID: r.ID, TaskID: r.TaskID}, InsertOpts: runInsertOpts(projectID, task.MaxAttempts, r.Priority)}
	}
	if len(params) > 0 {
		if _, err := client.InsertManyFastTx(ctx, tx, params); err != nil {
			return BackfillResult{}, fmt.Errorf("backfill: enqueue: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return BackfillResult{}, fmt.Errorf("backfill: %w", err)
	}
	return BackfillResult{Ticks: len(ticks), Created: nonNil(runs)}, nil
}

// backfillQuotas is what a project used of the quotas a backfill counts
// against, read under their locks.
type backfillQuotas struct{ queued, backfill int }

// backfillUse takes the project's queued_runs and backfill_ticks locks and
// reads their use.
func backfillUse(ctx context.Context, tx pgx.Tx, projectID string) (backfillQuotas, error) {
	var u backfillQuotas
	var err error
	if u.queued, err = quota.Count(ctx, tx, quota.QueuedRuns, projectID, countQueuedRunsSQL); err != nil {
		return u, err
	}
	u.backfill, err = quota.Count(ctx, tx, quota.BackfillTicks, projectID, countBackfillSQL)
	return u, err
}

// check refuses n more backfilled runs.
func (u backfillQuotas) check(lim quota.Limits, n int) error {
	if err := quota.Check(quota.BackfillTicks, lim.BackfillTicks, u.backfill, n); err != nil {
		return err
	}
	return quota.Check(quota.QueuedRuns, lim.QueuedRuns, u.queued, n)
}

// backfillTicks lists the task's ticks in [from, to), checking the bounds.
func backfillTicks(task Task, from, to, now time.Time) ([]time.Time, error) {
	switch {
	case task.OnDemand():
		return nil, invalid("schedule", "an on-demand task has no ticks to backfill")
	case !from.Before(to):
		return nil, invalid("from", "from must be before to")
	case to.After(now.Add(RunAtSkew)):
		return nil, invalid("to", "to must not be in the future: backfill covers past ticks")
	case to.Sub(from) > MaxBackfillSpan:
		return nil, invalid("from", "a backfill covers at most 366 days")
	case from.Before(now.Add(-MaxBackfillSpan)):
		return nil, invalid("from", "from is more than 366 days ago: a backfill covers ticks of the last 366 days")
	}
	if strings.HasPrefix(strings.TrimSpace(*task.Schedule), "@every") {
		// @every counts from whenever it is asked: its ticks have no fixed
		// instants, so a backfill could not match the claimed ones and two
		// backfills could run one period twice.
		return nil, invalid("schedule", "an @every schedule has no fixed ticks to backfill; use a cron expression")
	}
	s, err := ParseSchedule(*task.Schedule, task.Timezone)
	if err != nil {
		return nil, invalid("schedule", "%v", err)
	}
	var ticks []time.Time
	// Next is strictly after its argument and works in whole seconds.
	for n := s.Next(from.Add(-time.Nanosecond)); !n.IsZero() && n.Before(to); n = s.Next(n) {
		if len(ticks) == MaxBackfillTicks {
			return nil, invalid("to", "the range holds more than %d ticks; backfill it in parts", MaxBackfillTicks)
		}
		ticks = append(ticks, n)
	}
	if len(ticks) == 0 {
		return nil, invalid("to", "the range from %s to %s holds no tick of the schedule %q (timezone %s)",
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), *task.Schedule, task.Timezone)
	}
	return ticks, nil
}
