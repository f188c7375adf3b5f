package dbtest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/pgembed"
)

// The shared throwaway server. `go test ./...` runs one binary per package,
// several at a time; they share one server in $TMPDIR/switchboard-dbtest-UID:
//   - lock:  held exclusively while starting or stopping the server;
//   - users: every binary using the server holds a shared flock on it;
//   - url:   the server's maintenance URL.
//
// The last binary to leave (its exclusive flock on users succeeds) stops the
// server. A binary killed mid-run leaves it running; the next run reuses it.
var (
	sharedDir   string
	sharedUsers *os.File
)

func acquireShared(ctx context.Context) (string, error) {
	sharedDir = filepath.Join(os.TempDir(), fmt.Sprintf("switchboard-dbtest-%d", os.Getuid()))
	if err := os.MkdirAll(sharedDir, 0o755); err != nil {
		return "", fmt.Errorf("dbtest: %w", err)
	}
	lock, err := flock(filepath.Join(sharedDir, "lock"), syscall.LOCK_EX)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	users, err := flock(filepath.Join(sharedDir, "users"), syscall.LOCK_SH)
	if err != nil {
		return "", err
	}
	sharedUsers = users
	urlFile := filepath.Join(sharedDir, "url")
	if b, err := os.ReadFile(urlFile); err == nil && ping(ctx, strings.TrimSpace(string(b))) {
		return strings.TrimSpace(string(b)), nil
	}
	srv, err := pgembed.Start(ctx, pgembed.Options{
		Dir: filepath.Join(sharedDir, "server"), Database: "postgres",
		Ephemeral: true, Detached: true, MaxConnections: 800,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return "", fmt.Errorf("dbtest: start throwaway postgres (or set TEST_DATABASE_URL): %w", err)
	}
	if err := os.WriteFile(urlFile, []byte(srv.AdminURL()), 0o600); err != nil {
		return "", err
	}
	return srv.AdminURL(), nil
}

// releaseShared stops the shared server when no other test binary uses it.
func releaseShared() {
	if sharedUsers == nil {
		return
	}
	lock, err := flock(filepath.Join(sharedDir, "lock"), syscall.LOCK_EX)
	if err != nil {
		return
	}
	defer lock.Close()
	// Trade our shared lock for an exclusive one, without waiting: it is
	// granted only when no other binary holds the file.
	if syscall.Flock(int(sharedUsers.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		sharedUsers.Close()
		return
	}
	defer sharedUsers.Close()
	pgdata := filepath.Join(sharedDir, "server", "pgdata")
	if loc, err := os.ReadFile(filepath.Join(sharedDir, "server", "pgdata.location")); err == nil {
		pgdata = strings.TrimSpace(string(loc))
	}
	_ = pgembed.StopPID(pgdata)
	_ = os.Remove(filepath.Join(sharedDir, "url"))
}

func flock(path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dbtest: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("dbtest: flock %s: %w", path, err)
	}
	return f, nil
}

func ping(ctx context.Context, url string) bool {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	_ = c.Close(ctx)
	return true
}
