package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard/switchboard/infra/pgembed"
)

const replicaCount = 3

// adminEmail gets the admin role through `switchboard admin grant`.
const adminEmail = "admin@hacheck.test"

// cluster is PostgreSQL plus the replicas, all processes this program owns.
type cluster struct {
	dir      string
	bin      string
	dbURL    string
	pg       *pgembed.Server // nil when DATABASE_URL came from the environment
	pgOpts   pgembed.Options
	pgLog    string
	replicas []*replica
}

// startCluster builds the binary, starts PostgreSQL and the replicas, and
// waits until every replica is ready.
func startCluster(ctx context.Context, dir string, progress func(string, ...any)) (*cluster, error) {
	c := &cluster{dir: dir, bin: filepath.Join(dir, "switchboard")}
	progress("building %s", c.bin)
	if err := buildBinary(ctx, c.bin); err != nil {
		return c, err
	}
	if err := c.startPostgres(ctx, progress); err != nil {
		return c, err
	}
	secret := func() string { b := make([]byte, 24); _, _ = rand.Read(b); return hex.EncodeToString(b) }
	shared := []string{
		"DATABASE_URL=" + c.dbURL,
		"SWITCHBOARD_JWT_SECRET=" + secret(),
		"SWITCHBOARD_CLUSTER_SECRET=" + secret(),
		"SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=true",
		"SWITCHBOARD_LOG_FORMAT=json",
		"SWITCHBOARD_BCRYPT_COST=4",
		"SWITCHBOARD_SHUTDOWN_TIMEOUT=15s",
	}
	for i := range replicaCount {
		port, err := freePort()
		if err != nil {
			return c, err
		}
		r := &replica{
			name: fmt.Sprintf("r%d", i+1), idx: i, port: port, bin: c.bin,
			logPath: filepath.Join(dir, fmt.Sprintf("replica-%d.log", i+1)),
		}
		r.env = append(baseEnv(), shared...)
		r.env = append(r.env,
			"SWITCHBOARD_HTTP_ADDR="+r.addr(),
			"SWITCHBOARD_ADVERTISE_ADDR="+r.addr(),
			"SWITCHBOARD_DATA_DIR="+filepath.Join(dir, "data-"+r.name))
		c.replicas = append(c.replicas, r)
	}
	// All three at once: migrations must serialise on their advisory lock.
	for _, r := range c.replicas {
		if err := r.start(); err != nil {
			return c, err
		}
	}
	progress("started %d replicas, waiting for readiness", replicaCount)
	for _, r := range c.replicas {
		if err := r.waitReady(ctx, 60*time.Second); err != nil {
			return c, err
		}
	}
	return c, nil
}

// buildBinary runs `go build` from the module root.
func buildBinary(ctx context.Context, out string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", out, "./cmd/switchboard")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/switchboard: %v\n%s", err, b)
	}
	return nil
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, goTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run switchboard-hacheck from inside the switchboard module")
	}
	return filepath.Dir(mod), nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// startPostgres uses DATABASE_URL when set; otherwise starts a private
// server on a fixed port, so a restart keeps the URL the replicas hold.
func (c *cluster) startPostgres(ctx context.Context, progress func(string, ...any)) error {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		c.dbURL = u
		progress("using DATABASE_URL from the environment (the postgres restart check is skipped)")
		return nil
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	c.pgOpts = pgembed.Options{Dir: filepath.Join(c.dir, "pg"), Ephemeral: true, Port: port, MaxConnections: 300}
	c.pgLog = filepath.Join(c.pgOpts.Dir, "postgres.log")
	progress("starting postgres on 127.0.0.1:%d", port)
	if c.pg, err = pgembed.Start(ctx, c.pgOpts); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	c.dbURL = c.pg.URL()
	return nil
}

// stopPostgres is a fast shutdown, like a database failover or restart.
func (c *cluster) stopPostgres() error {
	if c.pg == nil {
		return errors.New("postgres is not ours")
	}
	return c.pg.Stop()
}

// restartPostgres starts it again on the same directory and port.
func (c *cluster) restartPostgres(ctx context.Context) error {
	s, err := pgembed.Start(ctx, c.pgOpts)
	if err != nil {
		return err
	}
	c.pg = s
	if s.URL() != c.dbURL {
		return fmt.Errorf("postgres came back at %s, not %s", s.URL(), c.dbURL)
	}
	return nil
}

// stop ends every replica (SIGTERM, then SIGKILL) and PostgreSQL.
func (c *cluster) stop() {
	var wg sync.WaitGroup
	for _, r := range c.replicas {
		wg.Go(func() { _, _, _ = r.terminate(5 * time.Second) })
	}
	wg.Wait()
	if c.pg != nil {
		_ = c.pg.Stop()
	}
}

// baseEnv is our environment without anything that configures switchboard.
// grantAdmin runs `switchboard admin grant email` against the cluster's
// database, as an operator would.
func (c *cluster) grantAdmin(ctx context.Context, email string) error {
	cmd := exec.CommandContext(ctx, c.bin, "admin", "grant", email)
	cmd.Env = append(baseEnv(), "DATABASE_URL="+c.dbURL, "SWITCHBOARD_LOG_LEVEL=warn")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("switchboard admin grant %s: %w\n%s", email, err, out)
	}
	return nil
}

func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "DATABASE_URL" || k == "PORT" || strings.HasPrefix(k, "SWITCHBOARD_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// replica is one switchboard process; it keeps its port across restarts.
type replica struct {
	name    string
	idx     int
	port    int
	bin     string
	env     []string
	logPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	starts  int
}

func (r *replica) addr() string        { return "127.0.0.1:" + strconv.Itoa(r.port) }
func (r *replica) url(p string) string { return "http://" + r.addr() + p }

// start launches the process, appending to its log.
func (r *replica) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		select {
		case <-r.done:
		default:
			return fmt.Errorf("%s is already running", r.name)
		}
	}
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.bin, "serve")
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", r.name, err)
	}
	r.cmd, r.done, r.waitErr = cmd, make(chan struct{}), nil
	r.starts++
	done := r.done
	go func() {
		err := cmd.Wait()
		logf.Close()
		r.mu.Lock()
		r.waitErr = err
		r.mu.Unlock()
		close(done)
	}()
	return nil
}

// running reports whether the process is alive.
func (r *replica) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// waitReady polls /healthz/ready until 200; it fails early if the process
// exits.
func (r *replica) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 3 * time.Second}
	last := "no answer"
	for time.Now().Before(deadline) {
		if !r.running() {
			return fmt.Errorf("%s exited before it was ready: %v (log %s)", r.name, r.exitErr(), r.logPath)
		}
		resp, err := hc.Get(r.url("/healthz/ready"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %s: %s (log %s)", r.name, timeout, last, r.logPath)
}

func (r *replica) exitErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waitErr
}

// kill is kill -9: no shutdown code runs.
func (r *replica) kill() error {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s never started", r.name)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %s: %w", r.name, err)
	}
	<-done
	return nil
}

// terminate sends SIGTERM and waits up to timeout for the exit, then kills.
// It returns how long the graceful exit took and the exit code.
func (r *replica) terminate(timeout time.Duration) (time.Duration, int, error) {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return 0, 0, nil
	}
	select {
	case <-done:
		return 0, cmd.ProcessState.ExitCode(), nil
	default:
	}
	began := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return time.Since(began), cmd.ProcessState.ExitCode(), nil
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return time.Since(began), -1, fmt.Errorf("%s did not exit within %s of SIGTERM", r.name, timeout)
	}
}

// rssKB reads VmRSS from /proc/PID/status.
func (r *replica) rssKB() (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
	return 0, errors.New("no VmRSS line")
}
