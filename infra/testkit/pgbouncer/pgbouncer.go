// Package pgbouncer runs a real PgBouncer in front of a PostgreSQL server,
// for the tests and the HA check that prove Switchboard works through a
// transaction-mode pooler: it writes the configuration, starts the
// process (as the postgres account when we are root: PgBouncer refuses to
// run as root), waits until a query passes through it, repoints it at
// another server (a promoted standby) with a reload, and stops it.
package pgbouncer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/freeport"
	"github.com/switchboard/switchboard/infra/pgembed"
)

// Find returns the pgbouncer binary ($PATH, then /usr/sbin where Debian
// installs it), or "" when none is installed.
func Find() string {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/local/bin/pgbouncer"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// ErrNotInstalled: no pgbouncer binary on this machine.
var ErrNotInstalled = errors.New("pgbouncer is not installed (apt-get install pgbouncer)")

// Alias is a database name PgBouncer serves, mapped to one on the server.
type Alias struct {
	Name     string // what clients connect to
	DBName   string // the database on the server
	PoolMode string // "session" or "transaction"; default the global mode
}

// Options configure a PgBouncer; zero values mean defaults.
type Options struct {
	// Dir holds the configuration, the log and the pid file; default a
	// new temporary directory.
	Dir string
	// Server is the upstream PostgreSQL's host:port; required.
	Server string
	// User and Password are the one account clients use and PgBouncer
	// logs in with. An empty Password means trust (a trust server).
	User, Password string
	// Aliases are named databases; every other name passes through to the
	// server's database of that name in PoolMode.
	Aliases []Alias
	// PoolMode of the pass-through databases: default "transaction".
	PoolMode string
	// PoolSize is the server connections per database and user; default 20.
	PoolSize int
	// Port to listen on; default a free one. It is kept across Repoint.
	Port int
	// Bin is the binary; default Find().
	Bin string
}

// Bouncer is a running PgBouncer.
type Bouncer struct {
	opts   Options
	tmpDir bool // Dir was made by Start: Stop removes it
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start writes the configuration, starts PgBouncer and waits until a query
// passes through it to the server's database dbname.
func Start(ctx context.Context, opts Options, dbname string) (*Bouncer, error) {
	opts.Bin = cmp.Or(opts.Bin, Find())
	if opts.Bin == "" {
		return nil, ErrNotInstalled
	}
	if opts.Server == "" {
		return nil, errors.New("pgbouncer: Server is required")
	}
	opts.User = cmp.Or(opts.User, "postgres")
	opts.PoolMode = cmp.Or(opts.PoolMode, "transaction")
	opts.PoolSize = cmp.Or(opts.PoolSize, 20)
	var err error
	tmpDir := opts.Dir == ""
	if tmpDir {
		if opts.Dir, err = os.MkdirTemp("", "pgbouncer-"); err != nil {
			return nil, err
		}
	}
	if opts.Port == 0 {
		if opts.Port, err = freeport.Port(); err != nil {
			return nil, err
		}
	}
	b := &Bouncer{opts: opts, tmpDir: tmpDir}
	if err := b.writeConfig(); err != nil {
		return nil, err
	}
	if err := b.launch(); err != nil {
		return nil, err
	}
	if err := b.waitReady(ctx, dbname); err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

// Addr is 127.0.0.1:port, where clients connect.
func (b *Bouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.opts.Port)) }

// LogPath is PgBouncer's log file.
func (b *Bouncer) LogPath() string { return filepath.Join(b.opts.Dir, "pgbouncer.log") }

// URL is the connection URL of database name through PgBouncer.
func (b *Bouncer) URL(name string) string {
	u := url.URL{Scheme: "postgres", Host: b.Addr(), Path: "/" + name, RawQuery: "sslmode=disable"}
	if b.opts.Password != "" {
		u.User = url.UserPassword(b.opts.User, b.opts.Password)
	} else {
		u.User = url.User(b.opts.User)
	}
	return u.String()
}

// Through is url with its host and port replaced by PgBouncer's: the same
// database and account, through the pooler.
func (b *Bouncer) Through(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("pgbouncer: parse url: %w", err)
	}
	u.Host = b.Addr()
	return u.String(), nil
}

// Repoint moves every database to server (host:port) and reloads
// (SIGHUP, as RELOAD on the console): clients keep the address, new
// server connections go to the new server, and those to the old one are
// closed as they are released.
func (b *Bouncer) Repoint(server string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opts.Server = server
	if err := b.writeConfig(); err != nil {
		return err
	}
	if b.cmd == nil {
		return errors.New("pgbouncer is not running")
	}
	return b.cmd.Process.Signal(syscall.SIGHUP)
}

// Stop ends PgBouncer (SIGTERM: immediate shutdown) and waits for it; a
// directory Start made is removed.
func (b *Bouncer) Stop() {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if b.tmpDir {
		defer os.RemoveAll(b.opts.Dir)
	}
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func (b *Bouncer) configPath() string { return filepath.Join(b.opts.Dir, "pgbouncer.ini") }

func (b *Bouncer) writeConfig() error {
	host, port, err := net.SplitHostPort(b.opts.Server)
	if err != nil {
		return fmt.Errorf("pgbouncer: server %q: %w", b.opts.Server, err)
	}
	var dbs strings.Builder
	for _, a := range b.opts.Aliases {
		fmt.Fprintf(&dbs, "%s = host=%s port=%s dbname=%s", a.Name, host, port, a.DBName)
		if a.PoolMode != "" {
			fmt.Fprintf(&dbs, " pool_mode=%s", a.PoolMode)
		}
		dbs.WriteString("\n")
	}
	fmt.Fprintf(&dbs, "* = host=%s port=%s\n", host, port)
	auth := "trust"
	if b.opts.Password != "" {
		auth = "scram-sha-256"
	}
	ini := fmt.Sprintf(`[databases]
%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = %s
auth_file = %s
admin_users = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 2000
max_db_connections = 0
; reconnect to a server that came back (or a promoted standby) within a
; second, and let a client wait at most 10 s for a server connection
server_login_retry = 1
query_wait_timeout = 10
server_connect_timeout = 3
ignore_startup_parameters = extra_float_digits
logfile = %s
pidfile = %s
`, dbs.String(), b.opts.Port, auth, filepath.Join(b.opts.Dir, "users.txt"), b.opts.User, b.opts.PoolMode,
		b.opts.PoolSize, b.LogPath(), filepath.Join(b.opts.Dir, "pgbouncer.pid"))
	users := fmt.Sprintf("%q %q\n", b.opts.User, b.opts.Password)
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": users} {
		if err := os.WriteFile(filepath.Join(b.opts.Dir, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("pgbouncer: write %s: %w", name, err)
		}
	}
	return nil
}

// launch starts the process; as root it runs as the postgres account,
// which must be able to write the directory.
func (b *Bouncer) launch() error {
	cred, err := account()
	if err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(b.opts.Dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("pgbouncer: chown %s: %w", b.opts.Dir, err)
		}
	}
	_ = os.Chmod(b.opts.Dir, 0o755)
	out, err := os.OpenFile(filepath.Join(b.opts.Dir, "pgbouncer.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(b.opts.Bin, b.configPath())
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr(cred)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start pgbouncer: %w", err)
	}
	b.cmd, b.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(b.exited) }()
	return nil
}

// account is who PgBouncer runs as: nil (ourselves) unless we are root,
// the account an embedded postgres would run as otherwise.
func account() (*syscall.Credential, error) {
	cred, err := pgembed.Unprivileged()
	if err != nil {
		return nil, fmt.Errorf("pgbouncer refuses to run as root: %w", err)
	}
	return cred, nil
}

func (b *Bouncer) waitReady(ctx context.Context, dbname string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var last error
	for {
		c, err := pgx.Connect(ctx, b.URL(dbname))
		if err == nil {
			_, err = c.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol)
			_ = c.Close(context.Background())
			if err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-b.exited:
			out, _ := os.ReadFile(filepath.Join(b.opts.Dir, "pgbouncer.out"))
			return fmt.Errorf("pgbouncer exited during start: %s", strings.TrimSpace(string(out)))
		case <-ctx.Done():
			return fmt.Errorf("pgbouncer not ready (log %s): %w", b.LogPath(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
