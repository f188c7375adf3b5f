-- +goose Up

-- Projects: the unit that owns tasks (and so their runs), created rooms,
-- API keys and the stream of run events, shared by members with roles
-- (viewer < developer < admin < owner). Every account has a personal
-- project (personal_of), made in the transaction that makes the account
-- (the trigger below, so every way of making one — register, create-user,
-- a rolling deploy's older replica — keeps the rule). A personal project
-- can be renamed and shared, never deleted.
CREATE TABLE projects (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    personal_of uuid UNIQUE REFERENCES users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE project_members (
    project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('viewer', 'developer', 'admin', 'owner')),
    added_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project_id, user_id)
);

-- A user's projects (every request resolves one; sockets follow all).
CREATE INDEX project_members_user_id_idx ON project_members (user_id);
-- Members are listed in (added_at, user_id) order with a cursor.
CREATE INDEX project_members_page_idx ON project_members (project_id, added_at, user_id);

-- Invites: single use, valid 7 days, only the SHA-256 of the token stored
-- (32 random bytes: a fast hash is enough, as for API keys). Accepting
-- sets accepted_at in the statement that finds the row, so an invite is
-- used once under any concurrency.
CREATE TABLE project_invites (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    email       text NOT NULL,
    role        text NOT NULL CHECK (role IN ('viewer', 'developer', 'admin', 'owner')),
    token_hash  bytea NOT NULL UNIQUE,
    invited_by  uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    accepted_at timestamptz,
    accepted_by uuid REFERENCES users (id) ON DELETE SET NULL,
    revoked_at  timestamptz
);

-- Pending invites of a project, newest first.
CREATE INDEX project_invites_pending_idx ON project_invites (project_id, created_at DESC)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;

-- Every existing account's personal project, its owner the account.
INSERT INTO projects (name, personal_of, created_at)
SELECT 'Personal', id, created_at FROM users;
INSERT INTO project_members (project_id, user_id, role, added_at)
SELECT id, personal_of, 'owner', created_at FROM projects;

-- +goose StatementBegin
CREATE FUNCTION switchboard_personal_project() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    pid uuid;
BEGIN
    INSERT INTO projects (name, personal_of) VALUES ('Personal', NEW.id) RETURNING id INTO pid;
    INSERT INTO project_members (project_id, user_id, role) VALUES (pid, NEW.id, 'owner');
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER users_personal_project AFTER INSERT ON users
    FOR EACH ROW EXECUTE FUNCTION switchboard_personal_project();

-- A row written without a project (a replica of the release before this
-- one, during a rolling deploy) belongs to its creator's personal project.
-- +goose StatementBegin
CREATE FUNCTION switchboard_default_project() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.project_id IS NULL THEN
        SELECT id INTO NEW.project_id FROM projects
        WHERE personal_of = (to_jsonb(NEW) ->> TG_ARGV[0])::uuid;
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd

-- A membership ended (removed, left, or the project deleted) notifies
-- every replica in the transaction that ends it, on the realtime bus's
-- channel (realtime/project_access.go reads it): each replica's sockets of
-- that user stop following the project's stream before the doorbell of
-- any event committed after it. A trigger, so the cascade of a project's
-- or an account's deletion notifies as well.
-- +goose StatementBegin
CREATE FUNCTION switchboard_member_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('switchboard_bus', json_build_object(
        'k', 'p', 'p', OLD.project_id, 'u', OLD.user_id,
        'y', CASE WHEN EXISTS (SELECT FROM projects WHERE id = OLD.project_id) THEN 'removed' ELSE 'deleted' END)::text);
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER project_members_removed AFTER DELETE ON project_members
    FOR EACH ROW EXECUTE FUNCTION switchboard_member_removed();

-- Tasks, created rooms and API keys belong to a project; owner_id and
-- user_id stay as who created them (an API key acts as its creator in its
-- project). Existing rows go to their creator's personal project.
ALTER TABLE tasks ADD COLUMN project_id uuid REFERENCES projects (id) ON DELETE CASCADE;
UPDATE tasks t SET project_id = p.id FROM projects p WHERE p.personal_of = t.owner_id;
ALTER TABLE tasks ALTER COLUMN project_id SET NOT NULL;
-- Project listing, newest first, keyset paginated (replaces the owner's).
CREATE INDEX tasks_project_idx ON tasks (project_id, created_at DESC, id DESC);
DROP INDEX tasks_owner_idx;
CREATE INDEX tasks_owner_id_idx ON tasks (owner_id);
CREATE TRIGGER tasks_default_project BEFORE INSERT ON tasks
    FOR EACH ROW EXECUTE FUNCTION switchboard_default_project('owner_id');

ALTER TABLE rooms ADD COLUMN project_id uuid REFERENCES projects (id) ON DELETE CASCADE;
UPDATE rooms r SET project_id = p.id FROM projects p WHERE p.personal_of = r.owner_id;
ALTER TABLE rooms ALTER COLUMN project_id SET NOT NULL;
CREATE INDEX rooms_project_id_idx ON rooms (project_id);
CREATE TRIGGER rooms_default_project BEFORE INSERT ON rooms
    FOR EACH ROW EXECUTE FUNCTION switchboard_default_project('owner_id');

ALTER TABLE api_keys ADD COLUMN project_id uuid REFERENCES projects (id) ON DELETE CASCADE;
UPDATE api_keys k SET project_id = p.id FROM projects p WHERE p.personal_of = k.user_id;
ALTER TABLE api_keys ALTER COLUMN project_id SET NOT NULL;
CREATE INDEX api_keys_project_id_idx ON api_keys (project_id, created_at);
CREATE TRIGGER api_keys_default_project BEFORE INSERT ON api_keys
    FOR EACH ROW EXECUTE FUNCTION switchboard_default_project('user_id');

-- Run events go to the project's stream (project:<id>) from now on. Each
-- user stream's stored task.run.* events are copied, in offset order, to
-- its account's personal project stream (offsets 1..n, a fresh epoch);
-- nothing is deleted from the user streams, so an old client's offsets
-- there stay valid.
INSERT INTO stream_heads (stream, last_offset, oldest_offset, oldest_ts)
SELECT 'project:' || p.id::text, count(*), 1, min(e.ts)
FROM stream_heads h
JOIN stream_events e ON e.stream_id = h.id
JOIN projects p ON h.stream = 'user:' || p.personal_of::text
WHERE e.event LIKE 'task.run.%'
GROUP BY p.id;

INSERT INTO stream_events (stream_id, stream_offset, ts, id, sender, event, payload)
SELECT nh.id, row_number() OVER (PARTITION BY nh.id ORDER BY e.stream_offset), e.ts, e.id, e.sender, e.event, e.payload
FROM stream_heads h
JOIN stream_events e ON e.stream_id = h.id
JOIN projects p ON h.stream = 'user:' || p.personal_of::text
JOIN stream_heads nh ON nh.stream = 'project:' || p.id::text
WHERE e.event LIKE 'task.run.%';

-- +goose Down
DELETE FROM stream_events WHERE stream_id IN (SELECT id FROM stream_heads WHERE stream LIKE 'project:%');
DELETE FROM stream_heads WHERE stream LIKE 'project:%';
DROP TRIGGER api_keys_default_project ON api_keys;
DROP TRIGGER rooms_default_project ON rooms;
DROP TRIGGER tasks_default_project ON tasks;
ALTER TABLE api_keys DROP COLUMN project_id;
ALTER TABLE rooms DROP COLUMN project_id;
DROP INDEX tasks_owner_id_idx;
CREATE INDEX tasks_owner_idx ON tasks (owner_id, created_at DESC, id DESC);
ALTER TABLE tasks DROP COLUMN project_id;
DROP TRIGGER users_personal_project ON users;
DROP TRIGGER project_members_removed ON project_members;
DROP FUNCTION switchboard_member_removed();
DROP FUNCTION switchboard_default_project();
DROP FUNCTION switchboard_personal_project();
DROP TABLE project_invites;
DROP TABLE project_members;
DROP TABLE projects;
