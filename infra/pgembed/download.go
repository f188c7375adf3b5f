package pgembed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	embeddedpostgres "github.com/fergusstrange/embedded-postgres"

	"github.com/switchboard/switchboard/infra/freeport"
)

// downloadedVersion is pinned: the library wipes its data directory whenever
// the configured version differs from the binaries it finds, so it must never
// change under a user's data.
const downloadedVersion = embeddedpostgres.V16

// startDownloaded is the fallback when no PostgreSQL is installed: the
// embedded-postgres library downloads binaries (needs internet once). It gets
// directories of its own under dir/downloaded — the library deletes its
// runtime path on every start and must not share ours. Unlike our launcher it
// cannot stop postgres if this process is killed.
func startDownloaded(ctx context.Context, opts Options, password string) (*Server, error) {
	if os.Geteuid() == 0 {
		return nil, fmt.Errorf("%w (downloaded binaries cannot run as root)", ErrNoPostgres)
	}
	base := filepath.Join(opts.Dir, "downloaded")
	port := opts.Port
	if port == 0 {
		var err error
		if port, err = freeport.Port(); err != nil {
			return nil, fmt.Errorf("embedded postgres port: %w", err)
		}
	}
	cfg := embeddedpostgres.DefaultConfig().
		Version(downloadedVersion).
		Port(uint32(port)).
		Database(opts.Database).
		Username("postgres").
		Password(password).
		RuntimePath(filepath.Join(base, "runtime")).
		BinariesPath(filepath.Join(base, "bin")).
		CachePath(filepath.Join(base, "cache")).
		DataPath(filepath.Join(base, "data")).
		Logger(os.Stderr)
	pg := embeddedpostgres.NewDatabase(cfg)
	if err := pg.Start(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoPostgres, err)
	}
	s := &Server{
		url:    fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable", password, port, opts.Database),
		pgdata: filepath.Join(base, "data"),
		stop:   pg.Stop,
		logger: opts.Logger,
	}
	if err := ensureDatabase(ctx, s.adminURL(), opts.Database); err != nil {
		_ = pg.Stop()
		return nil, fmt.Errorf("embedded postgres database: %w", err)
	}
	return s, nil
}
