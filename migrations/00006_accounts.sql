-- +goose Up

-- A disabled account cannot log in, and its tokens stop working at once on
-- every replica (each authenticated request reads the account).
ALTER TABLE users ADD COLUMN disabled_at timestamptz;

-- Emails move to the one normal form web.NormalizeEmail produces: trimmed,
-- ASCII only, A-Z lowered, a dot-atom local part and a host name domain. The
-- unique index becomes plain equality on that form (no lower(), whose result
-- on non-ASCII text depends on the collation).
DROP INDEX users_email_key;

-- Rows that normalise: rewritten in place. Where two rows normalise to the
-- same address (the old index was lower(email), which cannot tell
-- " a@x.com" from "a@x.com"), the one already in normal form wins, else the
-- oldest; the others keep their text and are disabled below.
WITH normal AS (
    SELECT id, email AS old,
           translate(btrim(email, E' \t\r\n'), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') AS email,
           created_at
    FROM users
), valid AS (
    SELECT *, row_number() OVER (PARTITION BY email ORDER BY (old = email) DESC, created_at, id) AS n
    FROM normal
    WHERE length(email) <= 254
      AND length(split_part(email, '@', 1)) <= 64
      AND email ~ '^[a-z0-9!#$%&''*+/=?^_`{|}~-]+(\.[a-z0-9!#$%&''*+/=?^_`{|}~-]+)*@[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$'
      AND length(split_part(email, '@', 2)) <= 253
)
UPDATE users u SET email = v.email, updated_at = now()
FROM valid v
WHERE u.id = v.id AND v.n = 1 AND u.email <> v.email;

-- Rows that do not normalise (a non-ASCII address such as "opſ@example.com",
-- which SWITCHBOARD_ADMIN_EMAILS' Unicode case folding could make an admin,
-- or a duplicate): kept, so their tasks and runs remain, but disabled and
-- never admin. No login can reach them (every lookup normalises first); an
-- operator sees them in GET /v1/admin/users.
UPDATE users SET disabled_at = now(), role = 'user', updated_at = now()
WHERE NOT (
    length(email) <= 254
    AND length(split_part(email, '@', 1)) <= 64
    AND length(split_part(email, '@', 2)) <= 253
    AND email ~ '^[a-z0-9!#$%&''*+/=?^_`{|}~-]+(\.[a-z0-9!#$%&''*+/=?^_`{|}~-]+)*@[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$'
) AND disabled_at IS NULL;

CREATE UNIQUE INDEX users_email_key ON users (email);

-- +goose Down
DROP INDEX users_email_key;
CREATE UNIQUE INDEX users_email_key ON users (lower(email));
ALTER TABLE users DROP COLUMN disabled_at;
