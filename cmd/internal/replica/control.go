package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// WaitReady polls /healthz/ready until it answers 200; it fails at once if
// the process exits, and after timeout.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 3 * time.Second}
	last := "no answer"
	for time.Now().Before(deadline) {
		if !p.Running() {
			return fmt.Errorf("%s exited before it was ready: %v%s", p.opts.Name, p.ExitErr(), p.logHint())
		}
		if res, err := hc.Get(p.URL("/healthz/ready")); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = res.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %s: %s%s", p.opts.Name, timeout, last, p.logHint())
}

func (p *Process) logHint() string {
	if p.opts.LogPath == "" {
		return ""
	}
	return " (log " + p.opts.LogPath + ")"
}

// Signal sends sig to the running process.
func (p *Process) Signal(sig os.Signal) error {
	cmd, _ := p.current()
	if cmd == nil {
		return fmt.Errorf("%s never started", p.opts.Name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %s to %s: %w", sig, p.opts.Name, err)
	}
	return nil
}

// Wait waits up to timeout for the process to exit and returns how it
// ended; exited is false when it still runs.
func (p *Process) Wait(timeout time.Duration) (exitErr error, exited bool) {
	_, done := p.current()
	if done == nil {
		return nil, true
	}
	select {
	case <-done:
		return p.ExitErr(), true
	case <-time.After(timeout):
		return nil, false
	}
}

// Kill is kill -9: no shutdown code runs. It returns once the process is
// gone; a process that already exited is left alone.
func (p *Process) Kill() error {
	cmd, done := p.current()
	if cmd == nil {
		return fmt.Errorf("%s never started", p.opts.Name)
	}
	select {
	case <-done:
		return nil
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill -9 %s: %w", p.opts.Name, err)
	}
	<-done
	return nil
}

// Terminate sends SIGTERM and waits up to timeout for the exit, then kills.
// It returns how long the graceful exit took and the exit code (-1 when it
// had to be killed).
func (p *Process) Terminate(timeout time.Duration) (time.Duration, int, error) {
	cmd, done := p.current()
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
		return time.Since(began), -1, fmt.Errorf("%s did not exit within %s of SIGTERM", p.opts.Name, timeout)
	}
}

// RSSKB is the resident memory of the running process, from /proc.
func (p *Process) RSSKB() (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		return 0, fmt.Errorf("read the memory of %s: %w", p.opts.Name, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
	return 0, errors.New("no VmRSS line")
}

// BaseEnv is this process's environment without anything that configures
// switchboard.
func BaseEnv() []string {
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

// SyncBuffer is a bytes.Buffer safe for concurrent writers: it collects a
// process's output, or a test's logs.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
