package migrations_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/migrations"
)

// TestProjectsMigration: a database at the schema before projects, filled
// as that release wrote it (accounts, tasks with runs and attempts, rooms
// with members, API keys, stored events), keeps every row and id once
// migrated; each account gets a personal project owning what it made, its
// old token and key still act there, and its run events are copied to the
// project's stream in order while its user stream keeps them.
func TestProjectsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.Connect(ctx, dbtest.NewEmptyDatabaseURL(t), db.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rm, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	migrateTo(t, pool, 15)

	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	ada, bob, task, run, key := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	exec(`INSERT INTO users (id, email, password_hash) VALUES ($1, 'ada@example.com', 'x'), ($2, 'bob@example.com', 'x')`, ada, bob)
	exec(`INSERT INTO tasks (id, owner_id, name, schedule, action, signing_secret) VALUES ($1, $2, 't', '@hourly', '{"type":"publish","event":"x"}', 'whsec_x')`, task, ada)
	exec(`INSERT INTO task_runs (id, task_id, trigger, scheduled_for, status) VALUES ($1, $2, 'manual', now(), 'failed')`, run, task)
	exec(`INSERT INTO task_run_attempts (run_id, attempt, status) VALUES ($1, 1, 'failed'), ($1, 2, 'failed')`, run)
	exec(`INSERT INTO rooms (name, owner_id, visibility) VALUES ('board', $1, 'members')`, ada)
	exec(`INSERT INTO room_members (room, user_id) VALUES ('board', $1), ('board', $2)`, ada, bob)
	secret := "sbk_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	exec(`INSERT INTO api_keys (id, user_id, name, prefix, secret_hash, scopes) VALUES ($1, $2, 'ci', 'sbk_AAAAAAAA', sha256($3::bytea), '{read,write}')`, key, ada, secret)
	exec(`INSERT INTO stream_heads (stream, epoch, last_offset) VALUES ('user:' || $1, 'old', 3)`, ada)
	exec(`INSERT INTO stream_events (stream_id, stream_offset, ts, event, payload)
		SELECT h.id, e.o, now(), e.name, '{}' FROM stream_heads h,
		(VALUES (1, 'task.run.queued'), (2, 'dm'), (3, 'task.run.failed')) AS e(o, name) WHERE h.stream = 'user:' || $1`, ada)

	if err := migrations.Migrate(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}

	project, err := accounts.PersonalProject(ctx, pool, ada)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	check := func(what, sql string, want int, args ...any) {
		t.Helper()
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil || n != want {
			t.Fatalf("%s: %d, %v; want %d", what, n, err, want)
		}
	}
	check("the task in ada's project", `SELECT count(*) FROM tasks WHERE id = $1 AND project_id = $2 AND owner_id = $3`, 1, task, project, ada)
	check("the run and its attempts", `SELECT count(*) FROM task_run_attempts a JOIN task_runs r ON r.id = a.run_id WHERE r.id = $1 AND r.task_id = $2`, 2, run, task)
	check("the room and its members", `SELECT count(*) FROM room_members m JOIN rooms r ON r.name = m.room WHERE r.name = 'board' AND r.project_id = $1`, 2, project)
	check("the key in ada's project", `SELECT count(*) FROM api_keys WHERE id = $1 AND project_id = $2`, 1, key, project)
	check("ada owns her project", `SELECT count(*) FROM project_members WHERE project_id = $1 AND user_id = $2 AND role = 'owner'`, 1, project, ada)
	check("bob has his own", `SELECT count(*) FROM projects p JOIN project_members m ON m.project_id = p.id AND m.role = 'owner' WHERE p.personal_of = $1 AND m.user_id = $1`, 1, bob)
	check("the user stream keeps its events", `SELECT count(*) FROM stream_events e JOIN stream_heads h ON h.id = e.stream_id WHERE h.stream = 'user:' || $1`, 3, ada)
	check("run events copied in order", `SELECT count(*) FROM stream_events e JOIN stream_heads h ON h.id = e.stream_id
		WHERE h.stream = 'project:' || $1 AND h.last_offset = 2
		  AND ((e.stream_offset = 1 AND e.event = 'task.run.queued') OR (e.stream_offset = 2 AND e.event = 'task.run.failed'))`, 2, project)

	// Old credentials act in the personal project, seeing the same rows.
	a, err := accounts.CheckSession(ctx, pool, accounts.Session{UserID: ada, TokenID: uuid.NewString()}, "")
	if err != nil || a.ProjectID != project || a.ProjectRole != accounts.ProjectOwner {
		t.Fatalf("old token: %+v, %v", a, err)
	}
	h, err := accounts.AuthenticateAPIKey(ctx, pool, secret)
	if err != nil || h.ProjectID != project || h.ProjectRole != accounts.ProjectDeveloper || h.KeyID != key {
		t.Fatalf("old key: %+v, %v", h, err)
	}
	// A new account gets its personal project in its own transaction.
	u, err := accounts.CreateUser(ctx, pool, "new@example.com", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accounts.PersonalProject(ctx, pool, u.ID); err != nil {
		t.Fatalf("new account: %v", err)
	}
}
