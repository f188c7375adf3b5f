package dbtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }

func TestNewPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := dbtest.NewPool(t), dbtest.NewPool(t)
	if _, err := a.Exec(ctx, "INSERT INTO users (email, password_hash) VALUES ('x@example.com', 'h')"); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM users").Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	if n != 0 {
		t.Fatalf("clones share rows: %d users in the second clone", n)
	}
	if err := a.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&n); err != nil {
		t.Fatalf("river tables missing from the template: %v", err)
	}
}

func TestNewTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{"first", "second"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tx := dbtest.NewTx(t)
			if _, err := tx.Exec(ctx, "INSERT INTO users (email, password_hash) VALUES ('same@example.com', 'h')"); err != nil {
				t.Fatalf("insert: %v", err)
			}
		})
	}
}

func TestNewEmptyDatabaseURL(t *testing.T) {
	t.Parallel()
	u := dbtest.NewEmptyDatabaseURL(t)
	conn, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("empty database has %d tables (%v)", n, err)
	}
}

func BenchmarkNewDatabaseURL(b *testing.B) {
	for b.Loop() {
		dbtest.NewDatabaseURL(b)
	}
}
