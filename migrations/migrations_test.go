package migrations_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }

// TestAccountsMigration: rows stored before emails were normalised (lower
// case by strings.ToLower, so Unicode folded; unique by lower(email)) end up
// in accounts.NormalizeEmail's form, or disabled and stripped of admin when
// they have none — the look-alike admin that SWITCHBOARD_ADMIN_EMAILS could
// make keeps nothing.
func TestAccountsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.Connect(ctx, dbtest.NewEmptyDatabaseURL(t), db.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrateTo(t, pool, 5)

	legacy := []struct{ email, role string }{
		{"ops@example.com", "admin"},
		{"opſ@example.com", "admin"}, // the look-alike
		{"Mixed@Example.COM", "user"},
		{" spaced@example.com", "user"},
		{"spaced@example.com", "user"}, // normal already: keeps the address
		{"bücher@example.com", "user"},
		{"user@bücher.de", "admin"},
		{"\"quoted\"@example.com", "user"},
	}
	for _, u := range legacy {
		if _, err := pool.Exec(ctx, `INSERT INTO users (email, password_hash, role) VALUES ($1, 'x', $2)`, u.email, u.role); err != nil {
			t.Fatalf("legacy row %q: %v", u.email, err)
		}
	}
	if err := migrations.Migrate(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}

	rows, err := pool.Query(ctx, `SELECT email, role, disabled_at IS NOT NULL FROM users`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string][2]any{}
	for rows.Next() {
		var email, role string
		var disabled bool
		if err := rows.Scan(&email, &role, &disabled); err != nil {
			t.Fatal(err)
		}
		got[email] = [2]any{role, disabled}
		norm, nerr := accounts.NormalizeEmail(email)
		switch {
		case !disabled && (nerr != nil || norm != email):
			t.Errorf("%q is enabled but not in normal form (%q, %v)", email, norm, nerr)
		case disabled && role == "admin":
			t.Errorf("%q is disabled but still admin", email)
		}
	}
	want := map[string][2]any{
		"ops@example.com":        {"admin", false},
		"opſ@example.com":        {"user", true},
		"mixed@example.com":      {"user", false},
		"spaced@example.com":     {"user", false},
		" spaced@example.com":    {"user", true},
		"bücher@example.com":     {"user", true},
		"user@bücher.de":         {"user", true},
		"\"quoted\"@example.com": {"user", true},
	}
	for email, w := range want {
		if got[email] != w {
			t.Errorf("%q: got %v, want %v (all: %v)", email, got[email], w, got)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO users (email, password_hash) VALUES ('mixed@example.com', 'x')`); err == nil {
		t.Fatal("the unique index lets a second mixed@example.com in")
	}
}

// migrateTo applies River's migrations and ours up to version, as a
// database of that release would be.
func migrateTo(t *testing.T, pool *pgxpool.Pool, version int64) {
	t.Helper()
	sqldb := stdlib.OpenDBFromPool(pool)
	defer sqldb.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqldb, os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateThroughPgBouncer: three replicas migrating at once through a
// transaction-mode PgBouncer all finish, and no advisory lock is left
// behind on a pooled server session (a session-level lock taken through
// the pooler stays on the session that ran it; its unlock runs on another).
func TestMigrateThroughPgBouncer(t *testing.T) {
	t.Parallel()
	direct := dbtest.NewEmptyDatabaseURL(t)
	pooled := dbtest.ThroughPgBouncer(t, direct)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	migrate := func() error {
		pool, err := db.Connect(ctx, pooled, db.Options{MaxConns: 4, TransactionPooled: true})
		if err != nil {
			return err
		}
		defer pool.Close()
		return migrations.Migrate(ctx, pool, slog.New(slog.DiscardHandler))
	}
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- migrate() }()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent migrate through pgbouncer: %v", err)
		}
	}
	conn, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var held int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
		WHERE l.locktype = 'advisory' AND d.datname = current_database()`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Fatalf("%d advisory locks left held on pooled server sessions after migrating", held)
	}
	if err := migrate(); err != nil {
		t.Fatalf("a later migrate through pgbouncer: %v", err)
	}
}

// TestMaintenanceScheduleMigration: 00014 deletes River's leftover
// periodic maintenance jobs (no producer fetches their queue any more) but
// not a running one, nor any other kind of job.
func TestMaintenanceScheduleMigration(t *testing.T) {
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
	migrateTo(t, pool, 13)
	_, err = pool.Exec(ctx, `
		INSERT INTO river_job (kind, args, max_attempts, queue, state, attempted_at)
		VALUES ('maintenance', '{"task":"a"}', 3, 'maintenance', 'available', NULL),
		       ('maintenance', '{"task":"b"}', 3, 'maintenance', 'retryable', now()),
		       ('maintenance', '{"task":"c"}', 3, 'maintenance', 'scheduled', NULL),
		       ('maintenance', '{"task":"d"}', 3, 'maintenance', 'running', now()),
		       ('task_run', '{}', 3, 'default', 'available', NULL)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrations.Migrate(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT kind || ':' || state FROM river_job ORDER BY kind`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(left) != 2 || left[0] != "maintenance:running" || left[1] != "task_run:available" {
		t.Fatalf("jobs left: %v (%v); want the running maintenance job and the task run", left, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO maintenance_schedule VALUES ('x', now())`); err != nil {
		t.Fatalf("maintenance_schedule: %v", err)
	}
}
