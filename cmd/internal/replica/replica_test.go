package replica

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a stand-in replica: run with
// REPLICA_TEST_ROLE it behaves as `switchboard serve` would for this
// package (ready on SWITCHBOARD_HTTP_ADDR, exit 0 on SIGTERM), or exits
// at once.
func TestMain(m *testing.M) {
	switch os.Getenv("REPLICA_TEST_ROLE") {
	case "serve":
		fakeServe()
	case "fail":
		fmt.Println("bad configuration")
		os.Exit(3)
	}
	// A variable that configures switchboard: replicas must not inherit it.
	os.Setenv("DATABASE_URL", "postgres://from-the-parent")
	os.Exit(m.Run())
}

func fakeServe() {
	fmt.Printf("serving on %s, DATABASE_URL=%q\n", os.Getenv("SWITCHBOARD_HTTP_ADDR"), os.Getenv("DATABASE_URL"))
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	srv := &http.Server{Addr: os.Getenv("SWITCHBOARD_HTTP_ADDR"), Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})}
	go func() { _ = srv.ListenAndServe() }()
	<-term
	fmt.Println("terminated")
	os.Exit(0)
}

// fakeBin is the test binary under a name of its own.
func fakeBin(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

func TestProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("start, ready, terminate, start again", func(t *testing.T) {
		t.Parallel()
		p, err := New(Options{Bin: fakeBin(t), Name: "r1", Env: []string{"REPLICA_TEST_ROLE=serve"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Kill() })
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err == nil {
			t.Fatal("a second Start while running was accepted")
		}
		if err := p.WaitReady(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, code, err := p.Terminate(10 * time.Second); err != nil || code != 0 || p.Running() {
			t.Fatalf("terminate: code %d, %v, running %v", code, err, p.Running())
		}
		if err := p.Start(); err != nil {
			t.Fatalf("restart: %v", err)
		}
		if err := p.WaitReady(ctx, 10*time.Second); err != nil || p.Starts() != 2 || p.PID() == 0 {
			t.Fatalf("after restart: %v, %d starts, pid %d", err, p.Starts(), p.PID())
		}
		out := p.Output()
		if strings.Count(out, "serving on "+p.Addr()+`, DATABASE_URL=""`) != 2 || strings.Count(out, "terminated") != 1 {
			t.Fatalf("output over two starts (the parent's DATABASE_URL must not leak):\n%s", out)
		}
	})

	t.Run("kill -9", func(t *testing.T) {
		t.Parallel()
		p, err := New(Options{Bin: fakeBin(t), Env: []string{"REPLICA_TEST_ROLE=serve"}, LogPath: filepath.Join(t.TempDir(), "r.log")})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if err := p.WaitReady(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		var exit *exec.ExitError
		if err, exited := p.Wait(time.Second); !exited || !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("after kill: exited %v, %v", exited, err)
		}
		if err := p.Kill(); err != nil {
			t.Fatalf("kill of an exited process: %v", err)
		}
		if out := p.Output(); !strings.Contains(out, "serving on") || strings.Contains(out, "terminated") {
			t.Fatalf("log file:\n%s", out)
		}
	})

	t.Run("exit before ready fails at once", func(t *testing.T) {
		t.Parallel()
		p, err := New(Options{Bin: fakeBin(t), Name: "bad", Env: []string{"REPLICA_TEST_ROLE=fail"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		err = p.WaitReady(ctx, time.Hour)
		if err == nil || !strings.Contains(err.Error(), "bad exited before it was ready: exit status 3") {
			t.Fatalf("wait ready: %v", err)
		}
		if !strings.Contains(p.Output(), "bad configuration") {
			t.Fatalf("output: %q", p.Output())
		}
	})
}

func TestNotStarted(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without a binary was accepted")
	}
	p, err := New(Options{Bin: "switchboard"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Running() || p.PID() != 0 || p.Kill() == nil || p.Signal(syscall.SIGTERM) == nil {
		t.Fatal("a replica never started acts as if it ran")
	}
	if _, code, err := p.Terminate(time.Second); code != 0 || err != nil {
		t.Fatalf("terminate before start: %d %v", code, err)
	}
	if err, exited := p.Wait(time.Second); err != nil || !exited {
		t.Fatalf("wait before start: %v %v", err, exited)
	}
}
