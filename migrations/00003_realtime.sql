-- +goose Up

-- WebSocket tickets: single use, 30 s. Only the SHA-256 of the ticket is
-- stored; redeeming is one atomic DELETE … RETURNING, so a ticket is valid
-- once on any replica. Ephemeral, so UNLOGGED (a crash just empties it).
CREATE UNLOGGED TABLE ws_tickets (
    hash       bytea PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX ws_tickets_expires_at_idx ON ws_tickets (expires_at);

-- Bus messages too large for a NOTIFY payload (8000 bytes): the message is
-- stored here and the notification carries its id. Readers fetch it within
-- milliseconds; a maintenance job deletes old rows.
CREATE UNLOGGED TABLE bus_spill (
    id         uuid PRIMARY KEY,
    body       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX bus_spill_created_at_idx ON bus_spill (created_at);

-- +goose Down
DROP TABLE bus_spill;
DROP TABLE ws_tickets;
