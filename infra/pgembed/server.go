package pgembed

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/freeport"
)

// Options configure a server. The zero value of each field means its default.
type Options struct {
	// Dir holds the data directory (Dir/pgdata), the password and the log.
	Dir string
	// Database is created on first start; default "switchboard".
	Database string
	// Ephemeral turns off fsync and friends: for throwaway test servers.
	Ephemeral bool
	// Detached leaves the server running when this process dies (test
	// servers shared by several `go test` package binaries). Otherwise the
	// kernel stops postgres when its parent dies.
	Detached bool
	// MaxConnections defaults to 200.
	MaxConnections int
	// Port to listen on; 0 picks a free one at each start. A fixed port keeps
	// the URL across a stop and start (chaos tests restart the server under
	// running clients).
	Port   int
	Logger *slog.Logger
}

// Server is a running (or attached-to) PostgreSQL.
type Server struct {
	url    string
	pgdata string
	cmd    *exec.Cmd // nil when attached to a server another process owns
	exited chan struct{}
	stop   func() error // fallback library's stop
	logger *slog.Logger
}

// URL is the connection URL of the database.
func (s *Server) URL() string { return s.url }

// Owned reports whether this process started the server (and stops it).
func (s *Server) Owned() bool { return s.cmd != nil || s.stop != nil }

// ErrNoPostgres is returned when no binaries are installed and none could be
// downloaded.
var ErrNoPostgres = errors.New("no PostgreSQL server binaries found and downloading them failed: " +
	"install PostgreSQL (e.g. apt-get install postgresql, brew install postgresql@16), or set DATABASE_URL to an existing database")

// Start runs the server in opts.Dir, or attaches to the one already running
// there (a second replica on the same data directory).
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("pgembed: Dir is required")
	}
	if opts.Database == "" {
		opts.Database = "switchboard"
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = 200
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	opts.Dir = dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	password, err := readOrCreateSecret(filepath.Join(dir, "postgres.password"))
	if err != nil {
		return nil, fmt.Errorf("postgres password: %w", err)
	}
	binDir := FindBinDir()
	if binDir == "" {
		return startDownloaded(ctx, opts, password)
	}
	acct, err := runAccount()
	if err != nil {
		return nil, fmt.Errorf("postgres account: %w", err)
	}
	pgdata, err := dataDir(dir, acct)
	if err != nil {
		return nil, fmt.Errorf("postgres data dir: %w", err)
	}
	if s, ok := attach(ctx, pgdata, password, opts); ok {
		return s, nil
	}
	if err := initdb(ctx, binDir, pgdata, password, acct, opts.Logger); err != nil {
		return nil, fmt.Errorf("initialise embedded postgres: %w", err)
	}
	s, err := launch(ctx, binDir, pgdata, password, acct, opts)
	if err != nil {
		return nil, fmt.Errorf("launch embedded postgres: %w", err)
	}
	if err := ensureDatabase(ctx, s.adminURL(), opts.Database); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("embedded postgres database: %w", err)
	}
	return s, nil
}

func (s *Server) adminURL() string {
	u, _ := url.Parse(s.url)
	u.Path = "/postgres"
	return u.String()
}

// AdminURL is the URL of the server's maintenance database "postgres".
func (s *Server) AdminURL() string { return s.adminURL() }

// Stop shuts an owned server down (fast shutdown, then kill after 15 s). It
// leaves an attached server alone.
func (s *Server) Stop() error {
	if s.stop != nil {
		return s.stop()
	}
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	return nil
}

// StopPID stops a server this process did not start, by its postmaster.pid.
func StopPID(pgdata string) error {
	pid, _, err := readPostmasterPID(pgdata)
	if err != nil {
		return fmt.Errorf("read postmaster.pid: %w", err)
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return fmt.Errorf("find postgres process %d: %w", pid, err)
	}
	if err := p.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("stop postgres process %d: %w", pid, err)
	}
	for range 150 {
		if !alive(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p.Kill()
}

func launch(ctx context.Context, binDir, pgdata, password string, acct *account, opts Options) (*Server, error) {
	port := opts.Port
	if port == 0 {
		var err error
		if port, err = freeport.Port(); err != nil {
			return nil, fmt.Errorf("embedded postgres port: %w", err)
		}
	}
	logFile, err := os.OpenFile(filepath.Join(opts.Dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open postgres log: %w", err)
	}
	defer logFile.Close()
	args := []string{"-D", pgdata, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "max_connections=" + strconv.Itoa(opts.MaxConnections),
		"-c", "shared_buffers=128MB"}
	if opts.Ephemeral {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	cmd := exec.Command(filepath.Join(binDir, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr(acct, !opts.Detached)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &Server{
		url:    fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable", password, port, opts.Database),
		pgdata: pgdata, cmd: cmd, exited: make(chan struct{}), logger: opts.Logger,
	}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("%w (log: %s)", err, filepath.Join(opts.Dir, "postgres.log"))
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := pgx.Connect(ctx, s.adminURL())
		if err == nil {
			return c.Close(ctx)
		}
		select {
		case <-s.exited:
			return errors.New("postgres exited during start")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after 60s: %w", err)
		}
	}
}

// attach connects to a server already running in pgdata (started by another
// replica sharing the data directory).
func attach(ctx context.Context, pgdata, password string, opts Options) (*Server, bool) {
	pid, port, err := readPostmasterPID(pgdata)
	if err != nil || !alive(pid) {
		return nil, false
	}
	s := &Server{url: fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable", password, port, opts.Database), pgdata: pgdata, logger: opts.Logger}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(cctx, s.adminURL())
	if err != nil {
		return nil, false
	}
	_ = c.Close(ctx)
	if err := ensureDatabase(ctx, s.adminURL(), opts.Database); err != nil {
		return nil, false
	}
	opts.Logger.Info("attached to embedded postgres started by another process", "pid", pid, "port", port)
	return s, true
}

func readPostmasterPID(pgdata string) (pid, port int, err error) {
	f, err := os.Open(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		return 0, 0, fmt.Errorf("open postmaster.pid: %w", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	if len(lines) < 4 {
		return 0, 0, errors.New("postmaster.pid is incomplete")
	}
	if pid, err = strconv.Atoi(lines[0]); err != nil {
		return 0, 0, fmt.Errorf("postmaster.pid pid: %w", err)
	}
	port, err = strconv.Atoi(lines[3])
	if err != nil {
		return 0, 0, fmt.Errorf("postmaster.pid port: %w", err)
	}
	return pid, port, nil
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func initdb(ctx context.Context, binDir, pgdata, password string, acct *account, logger *slog.Logger) error {
	if _, err := os.Stat(filepath.Join(pgdata, "PG_VERSION")); err == nil {
		return nil
	}
	// A half-finished initdb leaves files behind; start clean.
	if err := os.RemoveAll(pgdata); err != nil {
		return fmt.Errorf("clear data dir: %w", err)
	}
	if err := os.MkdirAll(pgdata, 0o700); err != nil {
		return fmt.Errorf("create pgdata: %w", err)
	}
	pwFile := filepath.Join(filepath.Dir(pgdata), ".initdb-pw")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("write initdb password file: %w", err)
	}
	defer os.Remove(pwFile)
	if acct != nil {
		for _, p := range []string{pgdata, pwFile} {
			if err := os.Chown(p, acct.uid, acct.gid); err != nil {
				return fmt.Errorf("chown %s: %w", p, err)
			}
		}
	}
	logger.Info("initialising embedded postgres", "pgdata", pgdata)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), "-D", pgdata, "-U", "postgres",
		"--auth=scram-sha-256", "--pwfile="+pwFile, "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = sysProcAttr(acct, true)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	return nil
}

func ensureDatabase(ctx context.Context, adminURL, name string) error {
	c, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to embedded postgres: %w", err)
	}
	defer c.Close(ctx)
	var exists bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// readOrCreateSecret returns the hex secret stored in path, creating it once.
func readOrCreateSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	buf := make([]byte, 24)
	_, _ = rand.Read(buf)
	s := hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return s, nil
}

// Secret returns a random secret kept in dir/name, generated on first use: the
// embedded mode's JWT and cluster secrets survive restarts this way.
func Secret(dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	return readOrCreateSecret(filepath.Join(dir, name))
}
