// Package replica runs switchboard replicas as OS processes, for the HA
// check and for cmd/switchboard's process tests (kill -9, SIGTERM): it
// builds the binary, starts a replica with its environment, waits until it
// is ready, stops it with SIGTERM or kills it with SIGKILL, and keeps what
// it wrote.
package replica

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"

	"github.com/switchboard/switchboard/infra/freeport"
)

// Options of one replica.
type Options struct {
	// Bin is the switchboard binary (see Build); required.
	Bin string
	// Name is how messages call the replica; default its address.
	Name string
	// Addr is where it listens (SWITCHBOARD_HTTP_ADDR), kept across
	// restarts; default a free loopback port.
	Addr string
	// Env is added to the environment of this process without the
	// variables that configure switchboard (DATABASE_URL, PORT,
	// SWITCHBOARD_*), so only what the caller sets applies.
	Env []string
	// LogPath receives the replica's output, appended across restarts;
	// empty keeps it in memory. Either way Output returns it.
	LogPath string
}

// Process is one replica; Start may be called again after it exited.
type Process struct {
	opts Options
	mem  SyncBuffer

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	starts  int
}

// New prepares a replica; nothing runs until Start.
func New(opts Options) (*Process, error) {
	if opts.Bin == "" {
		return nil, errors.New("replica: no binary")
	}
	if opts.Addr == "" {
		addr, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		opts.Addr = addr
	}
	opts.Name = cmp.Or(opts.Name, opts.Addr)
	return &Process{opts: opts}, nil
}

// Name is the replica's name in messages.
func (p *Process) Name() string { return p.opts.Name }

// Addr is the host:port it listens on.
func (p *Process) Addr() string { return p.opts.Addr }

// URL is the address of path on the replica.
func (p *Process) URL(path string) string { return "http://" + p.opts.Addr + path }

// LogPath is the file its output goes to, "" when kept in memory.
func (p *Process) LogPath() string { return p.opts.LogPath }

// Start launches `switchboard serve`; it refuses while the process runs.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.aliveLocked() {
		return fmt.Errorf("%s is already running", p.opts.Name)
	}
	out, closeOut, err := p.output()
	if err != nil {
		return err
	}
	cmd := exec.Command(p.opts.Bin, "serve")
	cmd.Env = append(BaseEnv(), "SWITCHBOARD_HTTP_ADDR="+p.opts.Addr)
	cmd.Env = append(cmd.Env, p.opts.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		closeOut()
		return fmt.Errorf("start %s: %w", p.opts.Name, err)
	}
	p.cmd, p.done, p.waitErr = cmd, make(chan struct{}), nil
	p.starts++
	go p.reap(cmd, p.done, closeOut)
	return nil
}

func (p *Process) output() (io.Writer, func(), error) {
	if p.opts.LogPath == "" {
		return &p.mem, func() {}, nil
	}
	f, err := os.OpenFile(p.opts.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open the log of %s: %w", p.opts.Name, err)
	}
	return f, func() { f.Close() }, nil
}

func (p *Process) reap(cmd *exec.Cmd, done chan struct{}, closeOut func()) {
	err := cmd.Wait()
	closeOut()
	p.mu.Lock()
	p.waitErr = err
	p.mu.Unlock()
	close(done)
}

func (p *Process) aliveLocked() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Running reports whether the process is alive.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.aliveLocked()
}

// Starts counts the times it was started.
func (p *Process) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// PID of the current or last process, 0 before the first start.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// ExitErr is how the last process ended (nil for exit 0 or still running).
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Output is everything the replica wrote, over all its starts.
func (p *Process) Output() string {
	if p.opts.LogPath == "" {
		return p.mem.String()
	}
	b, _ := os.ReadFile(p.opts.LogPath)
	return string(b)
}

func (p *Process) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}
