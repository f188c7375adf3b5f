// Package migrations owns the database schema: River's tables through
// rivermigrate and ours as numbered goose files embedded in the binary, both
// applied under one advisory lock so any number of replicas can start at once.
package migrations

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed *.sql
var files embed.FS

// lockKey is the advisory lock every migrating process takes ("swbd-mig").
const lockKey int64 = 0x73776264_6d6967

// Migrate applies River's migrations, then ours. Concurrent callers wait on
// the advisory lock; the ones that come second find nothing to do.
//
// The lock is transaction-level, held by a transaction that stays open
// while the migrations run on other connections of the pool: a
// session-level lock taken through a transaction-mode pooler (PgBouncer)
// stays on whichever server session ran it, its unlock runs on another,
// and the next migrator waits forever (or, handed that same session,
// takes it again beside a running migration).
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	lock, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: begin lock transaction: %w", err)
	}
	// Rolled back on a fresh context: a cancelled ctx must not leave the lock held.
	defer lock.Rollback(context.Background()) //nolint:errcheck
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}

	rm, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	res, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	for _, v := range res.Versions {
		logger.Debug("applied river migration", "version", v.Version, "name", v.Name)
	}

	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, db, files)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		logger.Debug("applied migration", "version", r.Source.Version, "file", r.Source.Path, "duration_ms", r.Duration.Milliseconds())
	}
	if len(res.Versions)+len(results) > 0 {
		logger.Info("migrations applied", "river", len(res.Versions), "switchboard", len(results))
	}
	return nil
}

// Hash identifies the schema Migrate produces: our files and River's
// migration list. Test harnesses name template databases by it.
func Hash() string {
	h := sha256.New()
	names, _ := fs.Glob(files, "*.sql")
	sort.Strings(names)
	for _, n := range names {
		b, _ := files.ReadFile(n)
		h.Write([]byte(n))
		h.Write(b)
	}
	if rm, err := rivermigrate.New(riverpgxv5.New(nil), nil); err == nil {
		for _, m := range rm.AllVersions() {
			fmt.Fprintf(h, "river:%d:%s\n", m.Version, m.SQLUp)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
