-- +goose Up

-- API keys: long-lived credentials for servers, acting as their owner within
-- their scopes. Only the SHA-256 of the secret is stored (the secret is 32
-- random bytes: a fast hash is enough and lets every request find its key by
-- an index lookup). Revoking deletes the row, so the next request on any
-- replica is refused. last_used_at is written at most once a minute per key.
CREATE TABLE api_keys (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text NOT NULL,
    prefix       text NOT NULL,
    secret_hash  bytea NOT NULL UNIQUE,
    scopes       text[] NOT NULL,
    expires_at   timestamptz,
    last_used_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX api_keys_user_id_idx ON api_keys (user_id, created_at);

-- Idempotency-Key records: the first answer to a POST, per caller and key,
-- replayed for 24 h. status is NULL while the first request is in flight
-- (until locked_until, after which the record counts as abandoned). The
-- answer is encrypted (it may hold secrets returned once, such as an API
-- key's). Logged, not UNLOGGED: losing them in a crash would let a retry
-- create a duplicate. Pruned by the idempotency_prune maintenance job.
CREATE TABLE idempotency_keys (
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key_hash     bytea NOT NULL,
    fingerprint  bytea NOT NULL,
    claim        uuid NOT NULL,
    locked_until timestamptz NOT NULL,
    status       integer,
    response     bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key_hash)
);

CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE api_keys;
