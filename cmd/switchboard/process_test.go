package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binOut  []byte
)

// binary builds switchboard once per test run, for tests that need a real
// process to kill.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "switchboard-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "switchboard")
		binOut, binErr = exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	})
	if binErr != nil {
		t.Fatalf("build: %v\n%s", binErr, binOut)
	}
	return binPath
}

// process is a replica running as its own OS process.
type process struct {
	cmd    *exec.Cmd
	URL    string
	addr   string
	out    *syncBuffer
	exited chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startProcess runs the binary as a replica on dbURL with the test secrets
// plus extra environment, and waits until it is ready.
func startProcess(t *testing.T, dbURL string, extra ...string) *process {
	t.Helper()
	p := &process{addr: freeAddr(t), out: &syncBuffer{}, exited: make(chan error, 1)}
	p.URL = "http://" + p.addr
	p.cmd = exec.Command(binary(t), "serve")
	p.cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "SWITCHBOARD_HTTP_ADDR="+p.addr,
		"SWITCHBOARD_JWT_SECRET=test-jwt-secret-0123456789", "SWITCHBOARD_CLUSTER_SECRET=test-cluster-secret-0123456789",
		"SWITCHBOARD_LOG_FORMAT=text", "SWITCHBOARD_SHUTDOWN_TIMEOUT=20s",
		"SWITCHBOARD_BCRYPT_COST=4", "SWITCHBOARD_AUTH_RATE=1000", "SWITCHBOARD_AUTH_BURST=1000")
	p.cmd.Env = append(p.cmd.Env, extra...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("output of the replica at %s:\n%s", p.addr, p.out.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(p.URL + "/healthz/ready")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.exited:
			t.Fatalf("replica exited before it was ready: %v\n%s", err, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica not ready after 30 s:\n%s", p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nodeID is the id the process registered under.
func (p *process) nodeID(t *testing.T, dbURL string) string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var id string
	if err := conn.QueryRow(context.Background(), `SELECT id::text FROM cluster_nodes WHERE addr = $1`, p.addr).Scan(&id); err != nil {
		t.Fatalf("node of %s: %v", p.addr, err)
	}
	return id
}

func (p *process) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait returns the process's exit error, failing the test after timeout.
func (p *process) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		return err
	case <-time.After(timeout):
		t.Fatalf("replica still running after %s", timeout)
		return nil
	}
}

func countNodes(t *testing.T, dbURL, id string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	_ = conn.QueryRow(context.Background(), `SELECT count(*) FROM cluster_nodes WHERE id::text = $1`, id).Scan(&n)
	return n
}
