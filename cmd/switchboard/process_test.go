package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/cmd/internal/replica"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
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
		binErr = replica.Build(context.Background(), replica.BuildOptions{Output: binPath})
	})
	if binErr != nil {
		t.Fatalf("build: %v", binErr)
	}
	return binPath
}

// process is a replica running as its own OS process.
type process struct {
	*replica.Process
	URL string
}

// startProcess runs the binary as a replica on dbURL with the test secrets
// plus extra environment, and waits until it is ready. It is killed when
// the test ends; a failed test logs its output.
func startProcess(t *testing.T, dbURL string, extra ...string) *process {
	t.Helper()
	env := append([]string{"DATABASE_URL=" + dbURL, "SWITCHBOARD_DATA_DIR=" + t.TempDir(),
		"SWITCHBOARD_JWT_SECRET=test-jwt-secret-0123456789", "SWITCHBOARD_CLUSTER_SECRET=test-cluster-secret-0123456789",
		"SWITCHBOARD_LOG_FORMAT=text", "SWITCHBOARD_SHUTDOWN_TIMEOUT=20s",
		"SWITCHBOARD_BCRYPT_COST=4", "SWITCHBOARD_AUTH_RATE=1000", "SWITCHBOARD_AUTH_BURST=1000"}, extra...)
	r, err := replica.New(replica.Options{Bin: binary(t), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Kill()
		if t.Failed() {
			t.Logf("output of the replica at %s:\n%s", r.Addr(), r.Output())
		}
	})
	if err := r.WaitReady(context.Background(), 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, r.Output())
	}
	return &process{Process: r, URL: r.URL("")}
}

// nodeID is the id the process registered under.
func (p *process) nodeID(t *testing.T, dbURL string) string {
	t.Helper()
	var id string
	if err := dbConn(t, dbURL).QueryRow(context.Background(), `SELECT id::text FROM cluster_nodes WHERE addr = $1`, p.Addr()).Scan(&id); err != nil {
		t.Fatalf("node of %s: %v", p.Addr(), err)
	}
	return id
}

func (p *process) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait returns the process's exit error, failing the test after timeout.
func (p *process) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	err, exited := p.Wait(timeout)
	if !exited {
		t.Fatalf("replica still running after %s", timeout)
	}
	return err
}

func countNodes(t *testing.T, dbURL, id string) int {
	t.Helper()
	var n int
	_ = dbConn(t, dbURL).QueryRow(context.Background(), `SELECT count(*) FROM cluster_nodes WHERE id::text = $1`, id).Scan(&n)
	return n
}

// dbConn opens a connection to dbURL, closed when the test ends.
func dbConn(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
