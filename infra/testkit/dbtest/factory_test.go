package dbtest_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

func TestUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("defaults are unique", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		a, b := dbtest.User(t, tx, nil), dbtest.User(t, tx, &dbtest.UserOpts{})
		if a.ID == "" || a.ID == b.ID || a.Email == b.Email || a.Role != "user" {
			t.Fatalf("users %+v and %+v", a, b)
		}
		var email, role string
		var disabled bool
		if err := tx.QueryRow(ctx, `SELECT email, role, disabled_at IS NOT NULL FROM users WHERE id = $1`, a.ID).Scan(&email, &role, &disabled); err != nil || email != a.Email || role != "user" || disabled {
			t.Fatalf("stored %q %q disabled=%v (%v), returned %+v", email, role, disabled, err, a)
		}
	})

	t.Run("options are stored", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		u := dbtest.User(t, tx, &dbtest.UserOpts{Email: "boss@example.com", Role: "admin", PasswordHash: "h", Disabled: true})
		var email, role, hash string
		var disabled bool
		if err := tx.QueryRow(ctx, `SELECT email, role, password_hash, disabled_at IS NOT NULL FROM users WHERE id = $1`, u.ID).Scan(&email, &role, &hash, &disabled); err != nil {
			t.Fatal(err)
		}
		if email != "boss@example.com" || role != "admin" || hash != "h" || !disabled || u.Role != "admin" {
			t.Fatalf("stored %q %q %q disabled=%v, returned %+v", email, role, hash, disabled, u)
		}
	})
}

func TestTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("defaults: a new owner, active, due in an hour, unique names", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		a, b := dbtest.Task(t, tx, nil), dbtest.Task(t, tx, nil)
		if a.ID == b.ID || a.Name == b.Name || a.OwnerID == b.OwnerID || a.NextRunAt == nil {
			t.Fatalf("tasks %+v and %+v", a, b)
		}
		var active bool
		var inHour bool
		if err := tx.QueryRow(ctx, `SELECT active, next_run_at BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes'
			FROM tasks WHERE id = $1 AND owner_id = $2`, a.ID, a.OwnerID).Scan(&active, &inHour); err != nil || !active || !inHour {
			t.Fatalf("stored active=%v due-in-an-hour=%v (%v)", active, inHour, err)
		}
	})

	t.Run("options are stored", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		owner := dbtest.User(t, tx, nil)
		due := time.Now().Add(-5 * time.Second).Truncate(time.Microsecond)
		late := dbtest.Task(t, tx, &dbtest.TaskOpts{OwnerID: owner.ID, Name: "late", Schedule: "@every 1s", NextRunAt: due,
			Overlap: "allow", Action: `{"type":"publish","event":"x"}`})
		paused := dbtest.Task(t, tx, &dbtest.TaskOpts{OwnerID: owner.ID, Paused: true})
		var next time.Time
		var name, schedule, overlap, event string
		if err := tx.QueryRow(ctx, `SELECT name, schedule, overlap, action->>'event', next_run_at FROM tasks WHERE id = $1 AND owner_id = $2`,
			late.ID, owner.ID).Scan(&name, &schedule, &overlap, &event, &next); err != nil {
			t.Fatal(err)
		}
		if name != "late" || schedule != "@every 1s" || overlap != "allow" || event != "x" || !next.Equal(due) {
			t.Fatalf("stored %q %q %q %q %s, want due %s", name, schedule, overlap, event, next, due)
		}
		var active bool
		var nextNull bool
		if err := tx.QueryRow(ctx, `SELECT active, next_run_at IS NULL FROM tasks WHERE id = $1`, paused.ID).Scan(&active, &nextNull); err != nil || active || !nextNull || paused.NextRunAt != nil {
			t.Fatalf("paused task: active=%v next null=%v %+v (%v)", active, nextNull, paused, err)
		}
	})
}

// Not parallel: it sets the environment.
func TestLogger(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		env         string
		debug, warn bool
	}{
		{env: "debug", debug: true, warn: true},
		{env: "warn", debug: false, warn: true},
		{env: "loud", debug: false, warn: true}, // not a level: info
	} {
		t.Setenv("SWITCHBOARD_TEST_LOGS", tc.env)
		l := dbtest.Logger(t)
		if l.Enabled(ctx, slog.LevelDebug) != tc.debug || l.Enabled(ctx, slog.LevelWarn) != tc.warn {
			t.Errorf("SWITCHBOARD_TEST_LOGS=%s: debug %v warn %v", tc.env, l.Enabled(ctx, slog.LevelDebug), l.Enabled(ctx, slog.LevelWarn))
		}
	}
	t.Setenv("SWITCHBOARD_TEST_LOGS", "")
	if l := dbtest.Logger(t); l.Enabled(ctx, slog.LevelError) != testing.Verbose() {
		t.Errorf("without SWITCHBOARD_TEST_LOGS: errors logged %v, want %v (go test -v)", l.Enabled(ctx, slog.LevelError), testing.Verbose())
	}
}
