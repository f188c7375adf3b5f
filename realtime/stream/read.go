package stream

import (
	"cmp"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/switchboard/switchboard/infra/db"
)

// DefaultReadLimit is how many events a read returns when its limit is zero.
const DefaultReadLimit = 1000

// History is one stream's events after a position, with what the caller
// needs to tell whether they are all it missed.
type History struct {
	Stream string
	Since  int64 // the position the events were read after
	// Epoch is the stream's current history; empty when the stream has no
	// head (never appended to, or reset since).
	Epoch string
	// Oldest is the first retained offset (Last + 1 when nothing is).
	Oldest int64
	// Last is the stream's latest offset (0 when nothing was ever stored).
	Last int64
	// Events after the position, in offset order, at most the limit.
	Events []Event
}

// More reports whether events after the returned ones remain: read again
// from the last one's offset.
func (h History) More() bool { return h.Next() < h.Last }

// Next is the position to read from next: the last returned offset, or,
// when none were returned, the read's position (moved up to the oldest
// retained offset).
func (h History) Next() int64 {
	if n := len(h.Events); n > 0 {
		return h.Events[n-1].Offset
	}
	return max(h.Since, h.Oldest-1)
}

// Recovered reports whether a reader positioned after offset since of
// epoch has missed nothing h cannot give it: same epoch, a position
// retained history still reaches, not beyond the head. A reader that knows
// nothing of the stream asks with epoch "" and since 0.
func (h History) Recovered(epoch string, since int64) bool {
	switch {
	case since < 0 || since > h.Last:
		return false // beyond the head: the history it saw is gone
	case epoch != h.Epoch && (epoch != "" || since != 0):
		return false
	}
	return since >= h.Oldest-1
}

// Cursor is a stream and the offset a reader has seen up to.
type Cursor struct {
	Stream string
	Since  int64
}

// DefaultReadBytes is the byte budget of a read when its Limit has none.
const DefaultReadBytes = 1 << 20

// FrameOverhead is what a stored event's frame adds to its payload, event
// name and stream name (the other fields and their names), as a read's
// budget counts it.
const FrameOverhead = 192

// Limit bounds one read. Events is the most events of each stream
// (DefaultReadLimit when zero); Bytes the most bytes of all its events
// together, counted as frames (payload, event and stream names and
// FrameOverhead; DefaultReadBytes when zero). The first event is returned
// whatever its size, so a read always makes progress: a read brings at
// most Bytes plus one event.
type Limit struct {
	Events int
	Bytes  int
}

// readSQL reads streams after their cursors in one statement, so each
// stream's events, epoch and oldest offset come from one snapshot (a
// concurrent prune or reset is seen entirely or not at all).
// -- why the window: the running total of frame sizes (octet_length reads
// a stored value's size without fetching it) stops the read at the byte
// budget in the database, across all its streams in cursor order; only
// the events within it are sent, and a stream past the budget still gets
// its head (epoch, oldest and last offsets) so the reader knows to read on.
const readSQL = `
WITH c AS (
    SELECT * FROM unnest(@streams::text[], @sinces::bigint[]) WITH ORDINALITY AS c(stream, since, ord)
), heads AS (
    SELECT c.ord, c.stream, c.since, h.id, h.epoch, h.oldest_offset, h.last_offset
    FROM c JOIN stream_heads h ON h.stream = c.stream
), sized AS (
    SELECT hd.ord, e.stream_offset,
           sum(coalesce(octet_length(e.payload), 0) + octet_length(e.event) + octet_length(hd.stream) + @overhead::bigint)
               OVER (ORDER BY hd.ord, e.stream_offset) AS upto,
           row_number() OVER (ORDER BY hd.ord, e.stream_offset) AS n
    FROM heads hd CROSS JOIN LATERAL (
        SELECT e.stream_offset, e.payload, e.event FROM stream_events e
        WHERE e.stream_id = hd.id AND e.stream_offset > greatest(hd.since, hd.oldest_offset - 1)
        ORDER BY e.stream_offset
        LIMIT @limit
    ) e
)
SELECT hd.ord, hd.epoch, hd.oldest_offset, hd.last_offset,
       e.stream_offset, e.ts, e.id, e.sender, e.event, e.payload
FROM heads hd
LEFT JOIN sized s ON s.ord = hd.ord AND (s.upto <= @budget OR s.n = 1)
LEFT JOIN stream_events e ON e.stream_id = hd.id AND e.stream_offset = s.stream_offset
ORDER BY hd.ord, e.stream_offset`

// Read returns stream's events after offset since, within lim.
func Read(ctx context.Context, q db.DB, stream string, since int64, lim Limit) (History, error) {
	hs, err := ReadMany(ctx, q, []Cursor{{Stream: stream, Since: since}}, lim)
	if err != nil {
		return History{}, err
	}
	return hs[0], nil
}

// ReadMany reads many streams in one query, within lim (its byte budget
// shared by all, spent in cursor order): a replica catching up every
// stream its sockets follow after a LISTEN gap. Results are in cursor
// order; a stream the budget did not reach has its head and no events.
func ReadMany(ctx context.Context, q db.DB, cursors []Cursor, lim Limit) ([]History, error) {
	if lim.Events < 0 || lim.Bytes < 0 {
		return nil, fmt.Errorf("read streams: %w: limit %+v is negative", ErrInvalid, lim)
	}
	hs := make([]History, len(cursors))
	streams, sinces := make([]string, len(cursors)), make([]int64, len(cursors))
	for i, c := range cursors {
		if c.Since < 0 {
			return nil, fmt.Errorf("read stream %q: %w: offset %d is negative", c.Stream, ErrInvalid, c.Since)
		}
		hs[i] = History{Stream: c.Stream, Since: c.Since, Oldest: 1}
		streams[i], sinces[i] = c.Stream, c.Since
	}
	if len(cursors) == 0 {
		return hs, nil
	}
	rows, err := q.Query(ctx, readSQL, pgx.NamedArgs{
		"streams": streams, "sinces": sinces, "limit": cmp.Or(lim.Events, DefaultReadLimit),
		"budget": cmp.Or(lim.Bytes, DefaultReadBytes), "overhead": FrameOverhead,
	})
	if err != nil {
		return nil, fmt.Errorf("read streams: %w", err)
	}
	if err := scanHistories(rows, hs); err != nil {
		return nil, fmt.Errorf("read streams: %w", err)
	}
	return hs, nil
}

func scanHistories(rows pgx.Rows, hs []History) error {
	var (
		ord          int
		epoch        string
		oldest, last int64
		offset       pgtype.Int8
		ts           pgtype.Timestamptz
		id, sender   pgtype.UUID
		event        pgtype.Text
		payload      []byte
	)
	_, err := pgx.ForEachRow(rows, []any{&ord, &epoch, &oldest, &last, &offset, &ts, &id, &sender, &event, &payload}, func() error {
		h := &hs[ord-1]
		h.Epoch, h.Oldest, h.Last = epoch, oldest, last
		if offset.Valid {
			h.Events = append(h.Events, Event{
				Stream: h.Stream, Offset: offset.Int64, Epoch: epoch, Event: event.String,
				ID: uuidString(id), From: uuidString(sender), Payload: payload, TS: ts.Time.UTC(),
			})
		}
		return nil
	})
	return err
}

func uuidString(u pgtype.UUID) string {
	if !u.Valid {
		return ""
	}
	return u.String()
}
