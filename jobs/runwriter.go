package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// RunWriterOptions configure a RunWriter; zero values mean defaults.
type RunWriterOptions struct {
	DB db.DB
	// MaxBatch is the most runs one statement writes; default 200.
	MaxBatch int
	// Statements is how many batch statements of each kind (start,
	// finish) may run at once; default 2. A DB that is not a pool (a
	// transaction) gets 1.
	Statements int
}

// RunWriter records run starts and attempt outcomes for many concurrent
// workers with one statement per batch instead of one transaction per run:
// its StartRun and FinishAttempt mean what the functions of that name
// mean, row for row. A run it cannot start in a batch (its task limits
// concurrency, or it is not startable) and every run of a batch whose
// statement failed go through the single-run functions, so each caller
// gets exactly their answer.
type RunWriter struct {
	db     db.DB
	start  *batcher[startRequest, RunContext]
	finish *batcher[finishRequest, Run]
}

type startRequest struct {
	runID   string
	attempt int
}

type finishRequest struct {
	runID string
	o     Outcome
}

// errUnbatched marks a request a batch left to the single-run path.
var errUnbatched = errors.New("not done in the batch")

// NewRunWriter builds a RunWriter; it has no goroutines of its own (the
// callers run the batches).
func NewRunWriter(opts RunWriterOptions) *RunWriter {
	statements := cmp.Or(opts.Statements, 2)
	if _, isTx := opts.DB.(pgx.Tx); isTx {
		statements = 1
	}
	max := cmp.Or(opts.MaxBatch, 200)
	w := &RunWriter{db: opts.DB}
	w.start = &batcher[startRequest, RunContext]{max: max, flushers: statements, run: w.startBatch}
	w.finish = &batcher[finishRequest, Run]{max: max, flushers: statements, run: w.finishBatch}
	return w
}

// StartRun is StartRun, batched with concurrent starts.
func (w *RunWriter) StartRun(ctx context.Context, runID string, attempt int) (RunContext, error) {
	rc, err := w.start.do(ctx, startRequest{runID: runID, attempt: attempt})
	if errors.Is(err, errUnbatched) {
		return StartRun(ctx, w.db, runID, attempt)
	}
	return rc, err
}

// FinishAttempt is FinishAttempt, batched with concurrent outcomes.
func (w *RunWriter) FinishAttempt(ctx context.Context, runID string, o Outcome) (Run, error) {
	run, err := w.finish.do(ctx, finishRequest{runID: runID, o: o})
	if errors.Is(err, errUnbatched) {
		return FinishAttempt(ctx, w.db, runID, o)
	}
	return run, err
}

// runKey matches a returned row to its request: a run id can appear twice
// in one batch only for two attempts (a late worker of a dead node).
type runKey struct {
	id      string
	attempt int
}

// startBatch starts, in one statement, the runs whose tasks have no
// concurrency limit; the rest (limited tasks take a slot one run at a
// time, see takeSlot; runs not found or not startable) are left to
// StartRun.
func (w *RunWriter) startBatch(ctx context.Context, in []startRequest) []batchResult[RunContext] {
	ids, attempts := make([]string, len(in)), make([]int32, len(in))
	for i, r := range in {
		ids[i], attempts[i] = r.runID, int32(r.attempt)
	}
	rows, err := w.db.Query(ctx, startRunsSQL(true), ids, attempts)
	got := map[runKey]RunContext{}
	if err == nil {
		var rc RunContext
		_, err = pgx.ForEachRow(rows, startDest(&rc), func() error {
			got[runKey{rc.Run.ID, rc.Run.Attempt}] = rc
			return nil
		})
	}
	out := make([]batchResult[RunContext], len(in))
	for i, r := range in {
		rc, ok := got[runKey{r.runID, r.attempt}]
		if db.Transient(err) {
			// The database is away: the single-run path would fail too;
			// the caller's retry batches again.
			out[i].err = fmt.Errorf("start run: %w", err)
			continue
		}
		if err != nil || !ok {
			out[i].err = errUnbatched
			continue
		}
		delete(got, runKey{r.runID, r.attempt}) // a duplicate request starts alone
		out[i].out = rc
	}
	return out
}

// finishBatch records, in one statement, the outcomes of a batch; each row
// is updated on the conditions FinishAttempt states.
func (w *RunWriter) finishBatch(ctx context.Context, in []finishRequest) []batchResult[Run] {
	rows, err := w.db.Query(ctx, finishAttemptsSQL, finishArgs(in)...)
	got := map[runKey]Run{}
	if err == nil {
		var run Run
		_, err = pgx.ForEachRow(rows, runDest(&run), func() error {
			got[runKey{run.ID, run.Attempt}] = run
			return nil
		})
	}
	out := make([]batchResult[Run], len(in))
	for i, r := range in {
		switch run, ok := got[runKey{r.runID, r.o.Attempt}]; {
		case db.Transient(err): // as in startBatch
			out[i].err = fmt.Errorf("finish run attempt: %w", err)
		case err != nil:
			out[i].err = errUnbatched
		case !ok:
			out[i].err = fmt.Errorf("finish run attempt: %w", db.ErrNotFound)
		default:
			out[i].out = run
		}
	}
	return out
}
