-- +goose Up
-- Sliding-window rate limit counters shared by every replica (see
-- infra/ratelimit). One row per key and window; only the current and the
-- previous window are ever read, older rows are deleted by a maintenance job.
-- UNLOGGED: losing the counters in a crash only resets the limits.
CREATE UNLOGGED TABLE rate_limit_counters (
    key          text        NOT NULL,
    window_start timestamptz NOT NULL,
    count        integer     NOT NULL,
    PRIMARY KEY (key, window_start)
) WITH (fillfactor = 70); -- room for HOT updates: count changes, the keys don't

CREATE INDEX rate_limit_counters_window_start ON rate_limit_counters (window_start);

-- +goose Down
DROP TABLE rate_limit_counters;
