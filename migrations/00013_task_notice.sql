-- +goose Up
-- A task that becomes due sooner than every claim loop may know (created
-- with a schedule, resumed, rescheduled earlier) rings the claim loops of
-- every replica: a NOTIFY on switchboard_tasks, sent at commit, so a
-- replica other than the one that served the API call claims its first
-- tick on time while its idle poll is long (jobs.ClaimerOptions.IdlePoll).
-- The claim transaction only moves next_run_at later (and to NULL when a
-- schedule ends), so it never fires: no NOTIFY, and no commit-time NOTIFY
-- lock, on the claim path. The payload is empty: one notice per
-- transaction however many rows changed (Postgres folds duplicates).

-- +goose StatementBegin
CREATE FUNCTION tasks_notify_due() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('switchboard_tasks', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER tasks_due_inserted AFTER INSERT ON tasks
    FOR EACH ROW WHEN (NEW.active AND NEW.next_run_at IS NOT NULL)
    EXECUTE FUNCTION tasks_notify_due();

CREATE TRIGGER tasks_due_sooner AFTER UPDATE OF next_run_at, active ON tasks
    FOR EACH ROW WHEN (NEW.active AND NEW.next_run_at IS NOT NULL
        AND (NOT OLD.active OR OLD.next_run_at IS NULL OR NEW.next_run_at < OLD.next_run_at))
    EXECUTE FUNCTION tasks_notify_due();

-- +goose Down
DROP TRIGGER tasks_due_sooner ON tasks;
DROP TRIGGER tasks_due_inserted ON tasks;
DROP FUNCTION tasks_notify_due();
