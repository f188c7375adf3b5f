-- +goose Up
-- A rotated task keeps its previous signing secret for an overlap: until
-- previous_secret_expires_at, webhook calls carry a signature with it beside
-- the current one (Standard Webhooks allows several), so receivers can move
-- to the new secret without missing a call.
ALTER TABLE tasks
    ADD COLUMN previous_signing_secret    text,
    ADD COLUMN previous_secret_expires_at timestamptz;

-- +goose Down
ALTER TABLE tasks
    DROP COLUMN previous_signing_secret,
    DROP COLUMN previous_secret_expires_at;
