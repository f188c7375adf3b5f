-- +goose Up
-- One row per running process (node): how the other nodes reach it and
-- whether it still heartbeats. Each node upserts its row every few seconds,
-- deletes it on graceful shutdown; a maintenance job removes rows silent for
-- over a minute. id is the node id, which is also the River client id (the
-- value River appends to river_job.attempted_by).
CREATE TABLE cluster_nodes (
    id           uuid PRIMARY KEY,
    name         text NOT NULL,
    addr         text NOT NULL,
    roles        text[] NOT NULL,
    version      text NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    draining     boolean NOT NULL DEFAULT false
);

CREATE INDEX cluster_nodes_heartbeat_at_idx ON cluster_nodes (heartbeat_at);

-- +goose Down
DROP TABLE cluster_nodes;
