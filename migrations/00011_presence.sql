-- +goose Up

-- Presence (realtime/presence.go): one row per room, user and node that
-- holds at least one of the user's sockets in the room, with how many.
-- A user is present in a room while any row for (room, user_id) exists.
-- Every change is made under a transaction-scoped advisory lock on
-- (room, user_id), and the transaction that inserts the first row of a
-- (room, user_id) NOTIFYs presence.join, the one that deletes the last
-- NOTIFYs presence.leave: commit order is the order members see them in.
-- A dead node's rows are deleted (with the leaves) in one transaction by a
-- surviving node, so exactly one announces them. Not UNLOGGED: after a
-- crash or a failover the rows must still match the sockets the live
-- nodes hold.
CREATE TABLE presence (
    room        text NOT NULL,
    user_id     uuid NOT NULL,
    node_id     uuid NOT NULL,
    connections integer NOT NULL CHECK (connections > 0),
    joined_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (room, user_id, node_id)
);

CREATE INDEX presence_node_id_idx ON presence (node_id);

-- +goose Down
DROP TABLE presence;
