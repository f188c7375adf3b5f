-- +goose Up

-- Sessions that can be ended. A user token carries the account's token
-- generation (claim gen; tokens from before have none: generation 0) and an
-- id (claim jti; a token without one is named by the first 16 bytes of its
-- SHA-256). It is valid while its generation equals the stored one and its
-- id is not in revoked_tokens. A password change, a reset and "sign out
-- everywhere" increment the generation; a logout (or a console sign-out)
-- stores the one token's id until it would have expired anyway. Both are
-- read by the one statement every authenticated request already makes.
ALTER TABLE users ADD COLUMN token_generation integer NOT NULL DEFAULT 0;

CREATE TABLE revoked_tokens (
    jti        uuid PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL
);

-- The maintenance loop deletes rows whose token has expired.
CREATE INDEX revoked_tokens_expires_at_idx ON revoked_tokens (expires_at);

-- Password reset links: single use, valid an hour. Only the SHA-256 of the
-- token is stored (32 random bytes: a fast hash is enough, as for API
-- keys). Redeeming sets used_at in the statement that finds the row, so a
-- link works once under any concurrency.
CREATE TABLE password_resets (
    token_hash bytea PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);

CREATE INDEX password_resets_user_id_idx ON password_resets (user_id);
CREATE INDEX password_resets_expires_at_idx ON password_resets (expires_at);

-- +goose Down
DROP TABLE password_resets;
DROP TABLE revoked_tokens;
ALTER TABLE users DROP COLUMN token_generation;
