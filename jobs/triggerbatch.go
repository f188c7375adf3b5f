package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/quota"
)

// MaxBatchItems is the most items one batch trigger takes.
const MaxBatchItems = 1000

// ErrBatchCancelOther is returned by TriggerBatch for a task whose overlap
// is cancel_other: each item would cancel the one before it. It wraps
// db.ErrConflict.
var ErrBatchCancelOther = fmt.Errorf("%w: a cancel_other task keeps one run; trigger it alone", db.ErrConflict)

// BatchItemResult is the answer to one item of a batch trigger: the run it
// made, the earlier run its idempotency key names (Replayed), or Err — a
// *ValidationError or ErrRunActive — when the item made nothing.
type BatchItemResult struct {
	Run      Run
	Replayed bool
	Err      error
}

// batch is a batch trigger on its way through TriggerBatch.
type batch struct {
	taskID  string
	project string
	items   []TriggerRequest
	results []BatchItemResult
	// firstOf maps an item to the earlier item of the batch with its
	// idempotency key (-1: none).
	firstOf []int
}

// TriggerBatch creates one manual run per item of the project's task, in
// one transaction, and answers each item in input order. An item that
// breaks a rule of its own (TriggerRequest.validate) answers that error
// and the others proceed. An idempotency key live on the task, or given by
// an earlier item of the batch, answers that run (Replayed). Overlap holds
// as if the items were triggered one after another: skip and buffer_one
// admit at most the first new item, when their rule admits one at all.
// The task row is locked first, as a single trigger does, so batches and
// triggers of one task on any replicas are serialised and a key makes one
// run; the key's primary key still backs that up. Only an error of the
// whole batch (the task, the database) is returned as err; so is a batch
// whose new runs would take the project past lim.QueuedRuns runs not yet
// final (a quota.ExceededError: the batch counts whole, and makes
// nothing).
func TriggerBatch(ctx context.Context, q db.DB, client *river.Client[pgx.Tx], lim quota.Limits, projectID, taskID string, items []TriggerRequest) ([]BatchItemResult, error) {
	if uuid.Validate(taskID) != nil {
		return nil, db.ErrNotFound
	}
	if len(items) == 0 || len(items) > MaxBatchItems {
		return nil, invalid("items", "a batch has 1 to %d items", MaxBatchItems)
	}
	b := newBatch(taskID, items, time.Now())
	b.project = projectID
	tx, err := q.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("trigger batch: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := b.run(ctx, tx, client, lim, projectID); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("trigger batch: %w", err)
	}
	b.resolveRepeats()
	return b.results, nil
}

// newBatch validates each item and links repeated keys to their first item.
func newBatch(taskID string, items []TriggerRequest, now time.Time) *batch {
	b := &batch{taskID: taskID, items: items, results: make([]BatchItemResult, len(items)), firstOf: make([]int, len(items))}
	first := map[string]int{}
	for i := range b.items {
		b.firstOf[i] = -1
		b.items[i].TaskID, b.items[i].RetryOf = taskID, ""
		if err := b.items[i].validate(now); err != nil {
			b.results[i].Err = err
			continue
		}
		key := b.items[i].IdempotencyKey
		if j, ok := first[key]; ok && key != "" {
			b.firstOf[i] = j
		} else if key != "" {
			first[key] = i
		}
	}
	return b
}

// run does the batch's work in tx.
func (b *batch) run(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], lim quota.Limits, projectID string) error {
	var maxAttempts int
	var overlap string
	var admits bool
	err := tx.QueryRow(ctx, `SELECT t.max_attempts, t.overlap, `+overlapAdmits("t.overlap", "t.id")+`
		FROM tasks t WHERE t.id = $1 AND t.project_id = $2 FOR UPDATE`, b.taskID, projectID).Scan(&maxAttempts, &overlap, &admits)
	if err != nil {
		return db.Translate(err)
	}
	if overlap == OverlapCancelOther {
		return ErrBatchCancelOther
	}
	if err := b.replayLiveKeys(ctx, tx, projectID); err != nil {
		return err
	}
	fresh := b.admit(overlap, admits)
	if len(fresh) == 0 {
		return nil
	}
	if err := takeQueuedRuns(ctx, tx, lim, projectID, len(fresh)); err != nil {
		return err
	}
	return b.insert(ctx, tx, client, fresh, maxAttempts)
}

// pending reports whether item i still needs an answer of its own: valid,
// not a repeat of an earlier item, not yet answered.
func (b *batch) pending(i int) bool {
	return b.results[i].Err == nil && b.firstOf[i] < 0 && b.results[i].Run.ID == ""
}

// replayLiveKeys answers the items whose idempotency key names a run made
// within IdempotencyWindow. The task row is locked, so no trigger can
// claim one of these keys until commit.
func (b *batch) replayLiveKeys(ctx context.Context, tx pgx.Tx, projectID string) error {
	var keys []string
	for i, it := range b.items {
		if b.pending(i) && it.IdempotencyKey != "" {
			keys = append(keys, it.IdempotencyKey)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `
		SELECT k.key, `+runColumns+` FROM unnest($2::text[]) AS q(key)
			JOIN task_run_keys k ON k.task_id = $1 AND k.key = q.key
			JOIN task_runs r ON r.id = k.run_id
		WHERE k.created_at > now() - make_interval(secs => $3)`,
		b.taskID, keys, IdempotencyWindow.Seconds())
	if err != nil {
		return fmt.Errorf("trigger batch: idempotency keys: %w", err)
	}
	type keyed struct {
		key string
		run Run
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (keyed, error) {
		var k keyed
		return k, row.Scan(append([]any{&k.key}, runDest(&k.run)...)...)
	})
	if err != nil {
		return fmt.Errorf("trigger batch: idempotency keys: %w", err)
	}
	live := make(map[string]Run, len(found))
	for _, k := range found {
		live[k.key] = k.run
	}
	for i, it := range b.items {
		if run, ok := live[it.IdempotencyKey]; ok && b.pending(i) {
			b.results[i] = BatchItemResult{Run: run, Replayed: true}
		}
	}
	return nil
}

// admit returns the items that make a run, in input order, and answers
// ErrRunActive to the others the overlap policy refuses: skip and
// buffer_one admit the first new item if their rule admits a run now, and
// then refuse, as the next trigger would.
func (b *batch) admit(overlap string, admits bool) []int {
	var fresh []int
	for i := range b.items {
		if !b.pending(i) {
			continue
		}
		if overlap == OverlapAllow || (admits && len(fresh) == 0) {
			fresh = append(fresh, i)
			continue
		}
		b.results[i].Err = ErrRunActive
	}
	return fresh
}

// insert claims the fresh items' keys, inserts their runs and River jobs.
func (b *batch) insert(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], fresh []int, maxAttempts int) error {
	reqs := make([]TriggerRequest, len(fresh))
	ids := make([]string, len(fresh))
	for n, i := range fresh {
		reqs[n], ids[n] = b.items[i], uuid.NewString()
	}
	if err := claimKeys(ctx, tx, b.taskID, reqs, ids); err != nil {
		return err
	}
	runs, err := insertManualRuns(ctx, tx, b.taskID, ids, reqs)
	if err != nil {
		return err
	}
	if err := enqueueRuns(ctx, tx, client, runs, reqs, b.project, maxAttempts); err != nil {
		return err
	}
	for n, i := range fresh {
		b.results[i].Run = runs[n]
	}
	return nil
}

// claimKeys takes the idempotency keys of new runs (ids[i] for reqs[i]; no
// key repeats), taking over expired ones. Under the task lock every key is
// free or expired; a live one means the lock did not hold, and fails the
// batch rather than making a second run for a key.
func claimKeys(ctx context.Context, tx pgx.Tx, taskID string, reqs []TriggerRequest, ids []string) error {
	var keys, runIDs []string
	for i, r := range reqs {
		if r.IdempotencyKey != "" {
			keys, runIDs = append(keys, r.IdempotencyKey), append(runIDs, ids[i])
		}
	}
	if len(keys) == 0 {
		return nil
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO task_run_keys AS k (task_id, key, run_id)
		SELECT $1, i.key, i.run_id FROM unnest($2::text[], $3::uuid[]) AS i(key, run_id)
		ON CONFLICT (task_id, key) DO UPDATE SET run_id = EXCLUDED.run_id, created_at = now()
			WHERE k.created_at <= now() - make_interval(secs => $4)`, taskID, keys, runIDs, IdempotencyWindow.Seconds())
	if err != nil {
		return fmt.Errorf("trigger batch: idempotency keys: %w", err)
	}
	if int(tag.RowsAffected()) != len(keys) {
		return fmt.Errorf("trigger batch: %d of %d idempotency keys were taken meanwhile", len(keys)-int(tag.RowsAffected()), len(keys))
	}
	return nil
}

// enqueueRuns inserts the runs' River jobs (runs[i] made for reqs[i]) in
// one statement; delayed ones as enqueueRun does for one.
func enqueueRuns(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], runs []Run, reqs []TriggerRequest, project string, maxAttempts int) error {
	params := make([]river.InsertManyParams, len(runs))
	var delayed bool
	for i, r := range runs {
		opts := runInsertOpts(project, maxAttempts, r.Priority)
		if at := reqs[i].RunAt; at != nil {
			opts.ScheduledAt, delayed = *at, true
		}
		params[i] = river.InsertManyParams{Args: RunArgs{RunID: r.ID, TaskID: r.TaskID}, InsertOpts: opts}
	}
	if delayed {
		ctx, _ = markInsertAvailable(ctx)
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, TasksChannel); err != nil {
			return fmt.Errorf("trigger batch: notify claim loops: %w", err)
		}
	}
	if _, err := client.InsertManyFastTx(ctx, tx, params); err != nil {
		return fmt.Errorf("trigger batch: enqueue: %w", err)
	}
	return nil
}

// resolveRepeats answers each item that repeats an earlier item's key with
// that item's answer: its run, replayed, or its error.
func (b *batch) resolveRepeats() {
	for i, j := range b.firstOf {
		if j < 0 {
			continue
		}
		b.results[i] = b.results[j]
		b.results[i].Replayed = b.results[j].Err == nil
	}
}
