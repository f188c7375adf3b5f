package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// Retention bounds each stream's history: an event is kept while it is
// among its stream's last MaxEvents and younger than MaxAge. The zero value
// is the default.
type Retention struct {
	// MaxEvents kept per stream; default 1000.
	MaxEvents int
	// MaxAge of a kept event; default 24 h.
	MaxAge time.Duration
	// Batch is how many streams one pass takes of each kind (due by count,
	// due by age), so at most twice that; default 100.
	Batch int
	// MaxDeletePerStream bounds what one pass deletes from one stream, so
	// a pass holds its heads (and delays appends to them) only briefly;
	// default 1000. A stream with more to delete is pruned again in the
	// next pass.
	MaxDeletePerStream int
}

// withDefaults fills zero (and nonsensical negative) fields with defaults.
func (r Retention) withDefaults() Retention {
	r.MaxEvents = positive(r.MaxEvents, 1000)
	r.MaxAge = positive(r.MaxAge, 24*time.Hour)
	r.Batch = positive(r.Batch, 100)
	r.MaxDeletePerStream = positive(r.MaxDeletePerStream, 1000)
	return r
}

func positive[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// PruneResult says what one Prune did.
type PruneResult struct {
	Passes  int   // transactions run
	Streams int   // stream visits (a stream pruned in two passes counts twice)
	Deleted int64 // events deleted
}

// lockDueSQL picks the streams that may have something to prune, from the
// two partial indexes on heads, never from events: those an append marked
// due (past prune_at) and those whose oldest event is too old. SKIP LOCKED:
// a stream being appended to right now is left to the next pass (Prune
// may still wait for an append, see below, but never for more than one
// per head).
//
// why: the heads are locked in stream-name order, the order every append
// locks its heads in. SKIP LOCKED does not keep Postgres from waiting: when
// the version it locks was updated by an append that has just committed,
// it also locks the newer versions, waiting for an append updating them
// now (heap_lock_updated_tuple, "while locking updated version"). Locked in
// any other order, that append may be waiting for a head this pass holds:
// a deadlock that aborts the prune or, as often, the append. Candidates are
// taken unlocked (one LIMIT per index) and locked in one ordered pass;
// "SKIP LOCKED" then means a busy candidate is left to the next pass.
const lockDueSQL = `
WITH candidates AS (
    (SELECT id FROM stream_heads WHERE due LIMIT @batch)
    UNION
    (SELECT id FROM stream_heads WHERE oldest_ts < now() - make_interval(secs => @max_age) LIMIT @batch)
)
SELECT h.id FROM stream_heads h
WHERE h.id IN (SELECT id FROM candidates)
  AND (h.due OR h.oldest_ts < now() - make_interval(secs => @max_age))
ORDER BY h.stream
FOR UPDATE OF h SKIP LOCKED`

// pruneSQL prunes the locked streams. It runs after lockDueSQL in the same
// transaction, so its snapshot holds every event the locked heads count.
//
// why: each stream's new oldest offset is the greatest of its count cut and
// its age cut (the first event young enough), capped at MaxDeletePerStream
// past its current oldest; the delete is then a range of the primary key per
// stream, and the head records the new oldest offset and time in the same
// transaction, so a reader never sees one without the other.
const pruneSQL = `
WITH h AS (
    SELECT id, oldest_offset, last_offset,
           least(oldest_offset + @max_delete, last_offset + 1) AS window_end
    FROM stream_heads WHERE id = ANY(@ids)
), cut AS (
    SELECT h.id, h.oldest_offset AS old_oldest, h.last_offset,
           least(h.window_end, greatest(h.oldest_offset, h.last_offset - @max_events + 1,
               coalesce((SELECT min(e.stream_offset) FROM stream_events e
                         WHERE e.stream_id = h.id AND e.stream_offset >= h.oldest_offset
                           AND e.stream_offset < h.window_end
                           AND e.ts >= now() - make_interval(secs => @max_age)),
                        h.window_end))) AS new_oldest
    FROM h
), deleted AS (
    DELETE FROM stream_events e USING cut c
    WHERE e.stream_id = c.id AND e.stream_offset >= c.old_oldest AND e.stream_offset < c.new_oldest
    RETURNING 1
), updated AS (
    UPDATE stream_heads s
    SET oldest_offset = c.new_oldest,
        oldest_ts = (SELECT e.ts FROM stream_events e
                     WHERE e.stream_id = c.id AND e.stream_offset = c.new_oldest),
        prune_at = c.new_oldest + @max_events,
        due = c.last_offset >= c.new_oldest + @max_events
    FROM cut c WHERE s.id = c.id
    RETURNING 1
)
SELECT (SELECT count(*) FROM deleted), (SELECT count(*) FROM updated)`

// Prune applies retention (a maintenance job calls it). Its cost is that of
// the streams that have something to prune and the events it deletes, not
// of the table: it finds work through the heads' partial indexes and deletes
// primary-key ranges. It runs passes of at most Batch streams, one
// transaction each, until no stream is left to prune or ctx ends.
func Prune(ctx context.Context, pool db.DB, r Retention) (PruneResult, error) {
	r = r.withDefaults()
	var res PruneResult
	for {
		streams, deleted, err := prunePass(ctx, pool, r)
		if err != nil {
			return res, fmt.Errorf("prune streams: %w", err)
		}
		if streams == 0 {
			return res, nil
		}
		res.Passes++
		res.Streams += streams
		res.Deleted += deleted
	}
}

func prunePass(ctx context.Context, pool db.DB, r Retention) (int, int64, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	age := r.MaxAge.Seconds()
	rows, err := tx.Query(ctx, lockDueSQL, pgx.NamedArgs{"batch": r.Batch, "max_age": age})
	if err != nil {
		return 0, 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) == 0 {
		return 0, 0, err
	}
	var deleted, updated int64
	err = tx.QueryRow(ctx, pruneSQL, pgx.NamedArgs{
		"ids": ids, "max_delete": r.MaxDeletePerStream, "max_events": r.MaxEvents, "max_age": age,
	}).Scan(&deleted, &updated)
	if err != nil {
		return 0, 0, err
	}
	return int(updated), deleted, tx.Commit(ctx)
}

// Reset drops a stream's history: its events and its head. The next append
// creates a new head with a new epoch and offsets from 1, so a reader
// resuming from the old epoch is told recovery was incomplete.
func Reset(ctx context.Context, q db.DB, stream string) error {
	tx, err := q.Begin(ctx)
	if err != nil {
		return fmt.Errorf("reset stream %q: %w", stream, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// why: lock the head first and delete in a later statement, whose
	// snapshot then includes every event of appends that committed while
	// we waited for the lock; one statement would leave those behind.
	var id int64
	err = tx.QueryRow(ctx, `SELECT id FROM stream_heads WHERE stream = $1 FOR UPDATE`, stream).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err == nil {
		_, err = tx.Exec(ctx, `
			WITH head AS (DELETE FROM stream_heads WHERE id = $1)
			DELETE FROM stream_events WHERE stream_id = $1`, id)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return fmt.Errorf("reset stream %q: %w", stream, err)
	}
	return nil
}
