// Package dbtest gives tests real, isolated PostgreSQL databases fast enough
// that nobody is tempted to mock: a template database built once from the
// real migrations (named by their hash, built under an advisory lock; the
// migrations are handed in by Main, so this package imports nothing of the
// project outside infra), cloned per test with STRATEGY FILE_COPY, or a
// rolled-back transaction. It also holds the fixtures every package's tests
// share (User, Task: see factory.go) and the Logger they hand to what they
// start.
//
// The server is TEST_DATABASE_URL's when set; otherwise one throwaway server
// started with the embedded launcher and shared by every package binary of a
// `go test ./...` run (see shared.go).
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/infra/db"
)

var (
	setupOnce sync.Once
	setupErr  error
	serverURL string // maintenance database URL of the server in use
	template  string // name of the migrated template database

	schemaHash    string      // of the migrations, from Main
	schemaMigrate MigrateFunc // the migrations, from Main

	txOnce sync.Once
	txPool *pgxpool.Pool
	txDB   string
	txErr  error
)

// MigrateFunc applies the migrations to a database (migrations.Migrate).
type MigrateFunc func(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error

// Main runs a package's tests against templates built by migrate (hash
// names the schema: migrations.Hash()) and then releases the shared
// server; atExit runs after the tests (a shared browser stops there).
// Call it from TestMain:
//
//	func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }
func Main(m *testing.M, hash string, migrate MigrateFunc, atExit ...func()) {
	schemaHash, schemaMigrate = hash, migrate
	code := m.Run()
	for _, f := range atExit {
		f()
	}
	if txPool != nil {
		txPool.Close()
		dropDatabase(txDB)
	}
	stopBouncer()
	releaseShared()
	os.Exit(code)
}

func setup() error {
	setupOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if schemaMigrate == nil {
			setupErr = errors.New("no migrations: call dbtest.Main(m, migrations.Hash(), migrations.Migrate) from TestMain")
			return
		}
		serverURL, setupErr = server(ctx)
		if setupErr != nil {
			return
		}
		template, setupErr = ensureTemplate(ctx, serverURL)
	})
	return setupErr
}

func server(ctx context.Context) (string, error) {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return withDatabase(u, "postgres")
	}
	return acquireShared(ctx)
}

// ensureTemplate builds the template database once per schema hash. The
// builder migrates a scratch database and renames it, so a crashed build
// never leaves a half-migrated template behind.
func ensureTemplate(ctx context.Context, adminURL string) (string, error) {
	name := "sbtpl_" + schemaHash
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("dbtest: connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", name); err != nil {
		return "", fmt.Errorf("dbtest: lock: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext($1))", name) //nolint:errcheck
	if exists(ctx, conn, name) {
		return name, nil
	}
	building := name + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(building)+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("dbtest: drop stale build: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(building)); err != nil {
		return "", fmt.Errorf("dbtest: create template: %w", err)
	}
	u, _ := withDatabase(adminURL, building)
	pool, err := db.Connect(ctx, u, db.Options{MaxConns: 4})
	if err != nil {
		return "", err
	}
	err = schemaMigrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("dbtest: migrate template: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(building)+" RENAME TO "+ident(name)); err != nil {
		return "", fmt.Errorf("dbtest: rename template: %w", err)
	}
	return name, nil
}

func exists(ctx context.Context, conn *pgx.Conn, name string) bool {
	var ok bool
	_ = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok)
	return ok
}

// NewDatabaseURL clones the template into a database of the test's own and
// returns its URL. The database is dropped when the test passes and kept,
// with its URL logged, when it fails.
func NewDatabaseURL(t testing.TB) string {
	t.Helper()
	if err := setup(); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return createDatabase(t, " TEMPLATE "+ident(template)+" STRATEGY FILE_COPY")
}

func createDatabase(t testing.TB, clause string) string {
	t.Helper()
	if err := setup(); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	ctx := context.Background()
	name := "sbtest_" + randomHex(6)
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err = conn.Exec(ctx, "CREATE DATABASE "+ident(name)+clause); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	u, _ := withDatabase(serverURL, name)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dbtest: kept database of failed test: %s", u)
			return
		}
		dropDatabase(name)
	})
	return u
}

// NewEmptyDatabaseURL creates a database with no schema at all, for tests of
// migrations themselves. Dropped on success, kept on failure like the others.
func NewEmptyDatabaseURL(t testing.TB) string {
	t.Helper()
	return createDatabase(t, "")
}

// NewPool returns a pool on a fresh clone: for code that must commit
// (NOTIFY, River clients, races between connections).
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := db.Connect(context.Background(), NewDatabaseURL(t), db.Options{MaxConns: 10})
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(pool.Close) // registered after the drop, so it runs first
	return pool
}

// NewTx returns a transaction rolled back when the test ends: the fastest
// isolation (~0.2 ms) for code that need not commit.
func NewTx(t testing.TB) pgx.Tx {
	t.Helper()
	if err := setup(); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	txOnce.Do(func() {
		// One clone per package binary serves every NewTx of that binary.
		ctx := context.Background()
		name := "sbtx_" + randomHex(6)
		txDB = name
		conn, err := pgx.Connect(ctx, serverURL)
		if err != nil {
			txErr = err
			return
		}
		defer conn.Close(ctx)
		if _, txErr = conn.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(template)+" STRATEGY FILE_COPY"); txErr != nil {
			return
		}
		u, _ := withDatabase(serverURL, name)
		txPool, txErr = db.Connect(ctx, u, db.Options{MaxConns: 20})
	})
	if txErr != nil {
		t.Fatalf("dbtest: %v", txErr)
	}
	tx, err := txPool.Begin(context.Background())
	if err != nil {
		t.Fatalf("dbtest: begin: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// AdminURL is the URL of the test server's maintenance database, for tests
// that stop connections or create databases of their own.
func AdminURL(t testing.TB) string {
	t.Helper()
	if err := setup(); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return serverURL
}

func dropDatabase(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)")
}

func withDatabase(rawURL, name string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("dbtest: parse url: %w", err)
	}
	u.Path = "/" + name
	q := u.Query()
	if !q.Has("connect_timeout") {
		// A loaded machine can take more than the default 5 s to fork
		// a backend and finish SCRAM; a test's database is local.
		q.Set("connect_timeout", "20")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}
