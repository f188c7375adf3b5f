package dbtest

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// Fixtures in the style of River's testfactory: one function per table that
// inserts a row with plain SQL (dbtest imports nothing outside infra) and
// returns it. Options are a pointer whose nil or zero fields mean unique or
// sensible defaults, so parallel tests never insert the same key and never
// serialise on each other's unique indexes.

// UserOpts adjust the row User inserts; nil means all defaults.
type UserOpts struct {
	// Email defaults to a unique address at example.com.
	Email string
	// PasswordHash defaults to "x", which matches no password: tests that
	// log in register through the API instead.
	PasswordHash string
	// Role defaults to "user".
	Role string
	// Disabled inserts an account an operator disabled.
	Disabled bool
}

// UserRow is the inserted user.
type UserRow struct {
	ID    string
	Email string
	Role  string
	// Project is the account's personal project (made with the account).
	Project string
}

// User inserts a user and returns it, failing the test on error.
func User(t testing.TB, q db.DB, opts *UserOpts) UserRow {
	t.Helper()
	o := cmp.Or(opts, &UserOpts{})
	row := UserRow{Email: cmp.Or(o.Email, "user-"+randomHex(8)+"@example.com"), Role: cmp.Or(o.Role, "user")}
	err := q.QueryRow(context.Background(), `
		INSERT INTO users (email, password_hash, role, disabled_at)
		VALUES (@email, @hash, @role, CASE WHEN @disabled THEN now() END) RETURNING id::text`,
		pgx.NamedArgs{"email": row.Email, "hash": cmp.Or(o.PasswordHash, "x"), "role": row.Role, "disabled": o.Disabled}).Scan(&row.ID)
	if err == nil {
		err = q.QueryRow(context.Background(), `SELECT id::text FROM projects WHERE personal_of = $1`, row.ID).Scan(&row.Project)
	}
	if err != nil {
		t.Fatalf("dbtest.User: %v", err)
	}
	return row
}

// TaskOpts adjust the row Task inserts; nil means all defaults.
type TaskOpts struct {
	// OwnerID defaults to a new User.
	OwnerID string
	// Name defaults to a unique "task-…".
	Name string
	// Schedule defaults to "@every 1h".
	Schedule string
	// Action is the action's JSON; default a publish of event "tick".
	Action string
	// Paused inserts an inactive task (next_run_at NULL, as the API keeps it).
	Paused bool
	// Overlap defaults to "skip".
	Overlap string
	// NextRunAt of an active task defaults to an hour from now.
	NextRunAt time.Time
}

// TaskRow is the inserted task.
type TaskRow struct {
	ID        string
	OwnerID   string
	Name      string
	NextRunAt *time.Time
}

// Task inserts a task without going through the jobs package's validation:
// for tests of code that reads tasks (claims, backlog, pruning), not of how
// they are created.
func Task(t testing.TB, q db.DB, opts *TaskOpts) TaskRow {
	t.Helper()
	o := cmp.Or(opts, &TaskOpts{})
	row := TaskRow{OwnerID: o.OwnerID, Name: cmp.Or(o.Name, "task-"+randomHex(8))}
	if row.OwnerID == "" {
		row.OwnerID = User(t, q, nil).ID
	}
	if !o.Paused {
		next := o.NextRunAt
		if next.IsZero() {
			next = time.Now().Add(time.Hour)
		}
		row.NextRunAt = &next
	}
	err := q.QueryRow(context.Background(), `
		INSERT INTO tasks (owner_id, name, schedule, action, active, overlap, signing_secret, next_run_at)
		VALUES (@owner, @name, @schedule, @action, @active, @overlap, @secret, @next)
		RETURNING id::text`,
		pgx.NamedArgs{
			"owner": row.OwnerID, "name": row.Name, "schedule": cmp.Or(o.Schedule, "@every 1h"),
			"action": cmp.Or(o.Action, `{"type":"publish","event":"tick"}`), "active": !o.Paused,
			"overlap": cmp.Or(o.Overlap, "skip"), "secret": "whsec_" + randomHex(16), "next": row.NextRunAt,
		}).Scan(&row.ID)
	if err != nil {
		t.Fatalf("dbtest.Task: %v", err)
	}
	return row
}

// Logger is the logger tests hand to the components they start. It discards
// everything unless SWITCHBOARD_TEST_LOGS names a level (debug, info, warn,
// error) or `go test -v` runs, which shows warnings and errors on stderr.
func Logger(t testing.TB) *slog.Logger {
	t.Helper()
	level, ok := testLogLevel()
	if !ok {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func testLogLevel() (slog.Level, bool) {
	var level slog.Level
	if v := os.Getenv("SWITCHBOARD_TEST_LOGS"); v != "" {
		if err := level.UnmarshalText([]byte(strings.ToUpper(v))); err == nil {
			return level, true
		}
		return slog.LevelInfo, true
	}
	return slog.LevelWarn, testing.Verbose()
}
