-- +goose Up

-- Rooms as resources (realtime/roomstore.go). A room name without a row is
-- an open ad-hoc room, as before rooms could be created. A created room has
-- an owner (always a member: its room_members row is made with the room and
-- cannot be removed) and a
-- visibility: open (anyone signed in may join, post and read it) or members
-- (only its members may). Access-reducing changes (a member removed, the
-- room deleted, open -> members) notify every replica in the same
-- transaction, so the eviction reaches each replica before the doorbell of
-- any event committed after it.
CREATE TABLE rooms (
    name       text PRIMARY KEY,
    owner_id   uuid NOT NULL REFERENCES users (id),
    visibility text NOT NULL CHECK (visibility IN ('open', 'members')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX rooms_owner_id_idx ON rooms (owner_id);

CREATE TABLE room_members (
    room     text NOT NULL REFERENCES rooms (name) ON DELETE CASCADE,
    user_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    added_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (room, user_id)
);

-- Members are listed in (added_at, user_id) order with a cursor.
CREATE INDEX room_members_page_idx ON room_members (room, added_at, user_id);
CREATE INDEX room_members_user_id_idx ON room_members (user_id);

-- +goose Down
DROP TABLE room_members;
DROP TABLE rooms;
