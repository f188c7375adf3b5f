package pgembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartStandby copies primary with pg_basebackup into opts.Dir (a
// streaming standby: standby.signal and primary_conninfo written by -R) and
// starts it on opts.Port, read-only until Promote. It shares the
// primary's password and database. Installed binaries only (not the
// downloaded fallback).
func StartStandby(ctx context.Context, primary *Server, opts Options) (*Server, error) {
	binDir := FindBinDir()
	if binDir == "" {
		return nil, ErrNoPostgres
	}
	pu, err := url.Parse(primary.URL())
	if err != nil {
		return nil, fmt.Errorf("primary url: %w", err)
	}
	password, _ := pu.User.Password()
	opts.Database = strings.TrimPrefix(pu.Path, "/")
	opts.MaxConnections = max(opts.MaxConnections, 200)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, "postgres.password"), []byte(password+"\n"), 0o600); err != nil {
		return nil, err
	}
	acct, err := runAccount()
	if err != nil {
		return nil, err
	}
	pgdata, err := dataDir(opts.Dir, acct)
	if err != nil {
		return nil, err
	}
	if err := baseBackup(ctx, binDir, pgdata, pu, password, acct); err != nil {
		return nil, err
	}
	s, err := launch(ctx, binDir, pgdata, password, acct, opts)
	if err != nil {
		return nil, err
	}
	if err := waitStreaming(ctx, primary, pgdata); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// waitStreaming returns once the primary streams WAL to the standby in
// pgdata. Only then does a clean shutdown of the primary hand the standby
// every commit (its walsender waits for the standby to have written all
// of it); a standby still connecting would be promoted without them.
func waitStreaming(ctx context.Context, primary *Server, pgdata string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, primary.adminURL())
	if err != nil {
		return fmt.Errorf("standby: connect to the primary: %w", err)
	}
	defer c.Close(context.Background())
	for {
		var streaming bool
		err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE state = 'streaming')`).Scan(&streaming)
		switch {
		case err != nil:
			return fmt.Errorf("standby: %w", err)
		case streaming:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby in %s is not streaming from the primary: %w", pgdata, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func baseBackup(ctx context.Context, binDir, pgdata string, primary *url.URL, password string, acct *account) error {
	if err := os.MkdirAll(pgdata, 0o700); err != nil {
		return fmt.Errorf("create pgdata: %w", err)
	}
	if acct != nil {
		if err := os.Chown(pgdata, acct.uid, acct.gid); err != nil {
			return fmt.Errorf("chown %s: %w", pgdata, err)
		}
	}
	cmd := exec.CommandContext(ctx, sibling(binDir, "pg_basebackup"), "-D", pgdata,
		"-h", primary.Hostname(), "-p", primary.Port(), "-U", primary.User.Username(),
		"-X", "stream", "-R", "--checkpoint=fast", "--no-sync")
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password)
	cmd.SysProcAttr = sysProcAttr(acct, true)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_basebackup: %v: %s", err, out)
	}
	return nil
}

// sibling is the program name installed beside initdb in binDir (a
// symlinked initdb points at the real directory), else on $PATH.
func sibling(binDir, name string) string {
	for _, dir := range []string{binDir, resolvedDir(filepath.Join(binDir, "initdb"))} {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return filepath.Join(binDir, name)
}

func resolvedDir(path string) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	return filepath.Dir(real)
}

// Promote ends a standby's recovery (pg_promote): from then on it is a
// primary that accepts writes.
func (s *Server) Promote(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.adminURL())
	if err != nil {
		return fmt.Errorf("promote: connect: %w", err)
	}
	defer c.Close(context.Background())
	var ok bool
	if err := c.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	if !ok {
		return errors.New("promote: the standby did not finish promoting within 60 s")
	}
	return nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string {
	u, err := url.Parse(s.url)
	if err != nil {
		return ""
	}
	return u.Host
}
