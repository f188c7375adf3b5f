-- +goose Up

-- Durable streams (realtime/stream): one per user ("user:<uuid>") and one per
-- room ("room:<name>"). A head row per stream assigns offsets: an append
-- updates the head (taking its row lock until commit) and numbers its events
-- from the head's previous last_offset, so offsets of a stream become visible
-- in commit order with no gaps. epoch names one history of the stream: a new
-- head (first append, or after Reset dropped the old one) gets a new one.
--
-- Retention bookkeeping lives on the head too, so pruning never scans
-- events: oldest_offset is the first retained offset (last_offset + 1 when
-- nothing is retained), oldest_ts the time of that event, and due is set by
-- an append once last_offset reaches prune_at (oldest_offset + the count
-- limit, written by the last prune). Only due and oldest_ts are indexed, and
-- an append changes neither except when it crosses prune_at or refills an
-- empty stream, so appends stay HOT updates (fillfactor leaves room).
CREATE TABLE stream_heads (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream        text NOT NULL UNIQUE,
    epoch         text NOT NULL DEFAULT left(md5(gen_random_uuid()::text), 12),
    last_offset   bigint NOT NULL DEFAULT 0,
    oldest_offset bigint NOT NULL DEFAULT 1,
    oldest_ts     timestamptz,
    prune_at      bigint NOT NULL DEFAULT 0,
    due           boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);

CREATE INDEX stream_heads_due_idx ON stream_heads (id) WHERE due;
CREATE INDEX stream_heads_oldest_ts_idx ON stream_heads (oldest_ts) WHERE oldest_ts IS NOT NULL;

-- One row per stored event, keyed by the head's id (8 bytes, not the stream
-- name) and the event's offset in its stream. The epoch is the head's: every
-- row of a stream belongs to its current epoch, because a reset deletes them
-- with the head. payload is the event's JSON, stored verbatim (compacted by
-- the writer), so a replay is byte-identical to the live frame.
CREATE TABLE stream_events (
    stream_id     bigint NOT NULL,
    stream_offset bigint NOT NULL,
    ts            timestamptz NOT NULL,
    id            uuid,
    sender        uuid,
    event         text NOT NULL,
    payload       bytea,
    PRIMARY KEY (stream_id, stream_offset)
);

-- +goose Down
DROP TABLE stream_events;
DROP TABLE stream_heads;
