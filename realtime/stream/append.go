package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/switchboard/switchboard/infra/db"
)

// appendSQL stores a batch in one statement.
//
// why: offsets come from the head rows, not from a sequence. The upsert
// takes each head's row lock and holds it until the statement's transaction
// commits, so a second append to the same stream waits for the first to
// commit before it numbers its events: offset order is commit order, and a
// reader that has seen offset N never later sees an offset <= N appear. A
// rolled-back append rolls its head back too, so there are no gaps either.
// Heads are locked in stream-name order (the ORDER BY feeding the upsert),
// the same order in every batch, so two batches never deadlock.
const appendSQL = `
WITH input AS MATERIALIZED (
    SELECT i.stream, i.event, i.id, i.sender, i.payload, coalesce(i.ts, now()) AS ts, i.ord
    FROM unnest(@streams::text[], @events::text[], @ids::uuid[], @senders::uuid[],
                @payloads::bytea[], @ts::timestamptz[])
         WITH ORDINALITY AS i(stream, event, id, sender, payload, ts, ord)
), counts AS (
    SELECT stream, count(*) AS n, min(ts) AS first_ts FROM input GROUP BY stream
), heads AS (
    INSERT INTO stream_heads AS h (stream, last_offset, oldest_ts, due)
    SELECT stream, n, first_ts, true FROM counts ORDER BY stream
    ON CONFLICT (stream) DO UPDATE
        SET last_offset = h.last_offset + excluded.last_offset,
            oldest_ts = coalesce(h.oldest_ts, excluded.oldest_ts),
            due = h.due OR h.last_offset + excluded.last_offset >= h.prune_at
    RETURNING h.id, h.stream, h.epoch, h.last_offset
), numbered AS (
    SELECT i.ord, h.id AS stream_id, h.epoch, i.ts, i.id, i.sender, i.event, i.payload,
           h.last_offset - c.n + row_number() OVER (PARTITION BY i.stream ORDER BY i.ord) AS stream_offset
    FROM input i JOIN heads h USING (stream) JOIN counts c USING (stream)
), stored AS (
    INSERT INTO stream_events (stream_id, stream_offset, ts, id, sender, event, payload)
    SELECT stream_id, stream_offset, ts, id, sender, event, payload FROM numbered
)
SELECT epoch, stream_offset, ts FROM numbered ORDER BY ord`

// Append stores events (for any number of streams) in one statement, one
// round trip, and returns where each was stored, in input order. On a pool
// the statement is its own transaction and has committed when Append
// returns. Inside a caller's transaction it holds the heads of the streams
// it touched until that transaction ends, so appends to those streams wait:
// keep such transactions short, and make one Append per transaction (put
// every event in it): a second Append would lock its heads after the
// first's, out of the name order that keeps appends and Prune from
// deadlocking.
//
// An invalid event (ErrInvalid) fails the whole batch and stores nothing.
func Append(ctx context.Context, q db.DB, events []Event) ([]Position, error) {
	positions, _, err := appendEvents(ctx, q, events)
	return positions, err
}

// AppendStored is Append returning the events as stored (what Stored
// returns for Append's positions), without compacting the payloads twice:
// what the appending replica delivers locally and rings.
func AppendStored(ctx context.Context, q db.DB, events []Event) ([]Event, error) {
	positions, payloads, err := appendEvents(ctx, q, events)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(events))
	for i, ev := range events {
		ev.Offset, ev.Epoch, ev.TS, ev.Payload = positions[i].Offset, positions[i].Epoch, positions[i].TS, payloads[i]
		out[i] = ev
	}
	return out, nil
}

// appendEvents stores events and returns their positions and the
// compacted payloads it stored.
func appendEvents(ctx context.Context, q db.DB, events []Event) ([]Position, [][]byte, error) {
	if len(events) == 0 {
		return nil, nil, nil
	}
	args, err := appendArgs(events)
	if err != nil {
		return nil, nil, err
	}
	rows, err := q.Query(ctx, appendSQL, args)
	if err != nil {
		return nil, nil, fmt.Errorf("append events: %w", err)
	}
	positions := make([]Position, 0, len(events))
	var p Position
	_, err = pgx.ForEachRow(rows, []any{&p.Epoch, &p.Offset, &p.TS}, func() error {
		if len(positions) == len(events) {
			return fmt.Errorf("more rows than the %d events", len(events))
		}
		p.Stream, p.TS = events[len(positions)].Stream, p.TS.UTC()
		positions = append(positions, p)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("append events: %w", err)
	}
	if len(positions) != len(events) {
		return nil, nil, fmt.Errorf("append events: stored %d of %d", len(positions), len(events))
	}
	return positions, args["payloads"].([][]byte), nil
}

// Stored returns events as Append stored them, given its positions: Offset,
// Epoch and TS set, Payload compacted. It is what local delivery and
// EncodeDoorbells take, equal to what Read returns for the same offsets.
func Stored(events []Event, ps []Position) []Event {
	out := make([]Event, len(events))
	for i, ev := range events {
		ev.Offset, ev.Epoch, ev.TS = ps[i].Offset, ps[i].Epoch, ps[i].TS
		ev.Payload, _ = compactPayload(ev.Payload) // Append refused any that fails
		out[i] = ev
	}
	return out
}

// appendArgs validates events and turns them into the statement's arrays.
func appendArgs(events []Event) (pgx.NamedArgs, error) {
	n := len(events)
	streams, names := make([]string, n), make([]string, n)
	ids, senders := make([]pgtype.UUID, n), make([]pgtype.UUID, n)
	payloads, ts := make([][]byte, n), make([]pgtype.Timestamptz, n)
	for i, ev := range events {
		var err error
		if err = ValidateStream(ev.Stream); err != nil {
			return nil, fmt.Errorf("append event %d: %w", i, err)
		}
		if ev.Event == "" || !validText(ev.Event) {
			return nil, fmt.Errorf("append event %d: %w: event name must be non-empty UTF-8 text", i, ErrInvalid)
		}
		if ids[i], err = optionalUUID("id", ev.ID); err != nil {
			return nil, fmt.Errorf("append event %d: %w", i, err)
		}
		if senders[i], err = optionalUUID("from", ev.From); err != nil {
			return nil, fmt.Errorf("append event %d: %w", i, err)
		}
		if payloads[i], err = compactPayload(ev.Payload); err != nil {
			return nil, fmt.Errorf("append event %d: %w", i, err)
		}
		streams[i], names[i] = ev.Stream, ev.Event
		ts[i] = pgtype.Timestamptz{Time: ev.TS.Truncate(time.Microsecond), Valid: !ev.TS.IsZero()}
	}
	return pgx.NamedArgs{
		"streams": streams, "events": names, "ids": ids, "senders": senders,
		"payloads": payloads, "ts": ts,
	}, nil
}

func optionalUUID(field, s string) (pgtype.UUID, error) {
	if s == "" {
		return pgtype.UUID{}, nil
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return pgtype.UUID{}, fmt.Errorf("%w: %q must be a UUID, got %q", ErrInvalid, field, s)
	}
	return pgtype.UUID{Bytes: u, Valid: true}, nil
}

// compactPayload returns p compacted, nil for none, or ErrInvalid when it
// is not UTF-8 JSON (browsers drop a socket over invalid UTF-8 and NOTIFY
// refuses it).
func compactPayload(p []byte) ([]byte, error) {
	if len(p) == 0 {
		return nil, nil
	}
	if !utf8.Valid(p) {
		return nil, fmt.Errorf("%w: payload is not valid UTF-8", ErrInvalid)
	}
	var buf bytes.Buffer
	buf.Grow(len(p))
	if err := json.Compact(&buf, p); err != nil {
		return nil, fmt.Errorf("%w: payload is not JSON: %v", ErrInvalid, err)
	}
	return buf.Bytes(), nil
}
