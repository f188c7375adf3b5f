package db_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }

// TestTransient classifies errors real Postgres and real sockets return.
func TestTransient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewEmptyDatabaseURL(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, syntax := conn.Exec(ctx, `SELEC 1`)
	_, unique := conn.Exec(ctx, `CREATE TABLE u (k int PRIMARY KEY); INSERT INTO u VALUES (1), (1)`)
	_, division := conn.Exec(ctx, `SELECT 1/0`)
	victim, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, victim.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	_, terminated := victim.Exec(ctx, `SELECT 1`) // 57P01, then the closed connection
	_, afterTerminated := victim.Exec(ctx, `SELECT 1`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, refused := pgx.Connect(ctx, "postgres://postgres@"+addr+"/x?connect_timeout=2")
	// A server that accepts and never answers (a restarting or overloaded
	// PostgreSQL): the connect times out.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, connectTimeout := pgx.Connect(ctx, "postgres://postgres@"+silent.Addr().String()+"/x?connect_timeout=1")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, canceled := conn.Exec(cancelled, `SELECT 1`)
	expired, cancelExpired := context.WithTimeout(ctx, time.Millisecond)
	defer cancelExpired()
	_, timedOut := conn.Exec(expired, `SELECT pg_sleep(1)`)

	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"syntax error", syntax, false},
		{"unique violation", unique, false},
		{"division by zero", division, false},
		{"terminated backend", terminated, true},
		{"statement on the terminated connection", afterTerminated, true},
		{"connection refused", refused, true},
		{"connect timeout", connectTimeout, true},
		{"context cancelled", canceled, false},
		{"the caller's deadline", timedOut, false},
	} {
		if c.want && c.err == nil {
			t.Fatalf("%s: expected an error", c.name)
		}
		if got := db.Transient(c.err); got != c.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestRetryTransient(t *testing.T) {
	t.Parallel()
	transient := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	permanent := errors.New("no such run")
	ctx := context.Background()
	calls := 0
	err := db.RetryTransient(ctx, 10*time.Second, func() error {
		if calls++; calls < 3 {
			return transient
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("two transient failures then success: err %v after %d calls (want nil after 3)", err, calls)
	}
	calls = 0
	if err := db.RetryTransient(ctx, 10*time.Second, func() error { calls++; return permanent }); !errors.Is(err, permanent) || calls != 1 {
		t.Fatalf("a permanent error: %v after %d calls (want it after 1)", err, calls)
	}
	stopped, stop := context.WithCancel(ctx)
	stop()
	calls = 0
	if err := db.RetryTransient(stopped, 10*time.Second, func() error { calls++; return transient }); !errors.Is(err, transient) || calls != 1 {
		t.Fatalf("stopped: %v after %d calls (want the error after 1)", err, calls)
	}
	calls = 0
	if err := db.RetryTransient(ctx, 250*time.Millisecond, func() error { calls++; return transient }); !errors.Is(err, transient) || calls < 2 || calls > 3 {
		t.Fatalf("within 250ms: %v after %d calls (want the error after 2 or 3: 100 and 200 ms waits)", err, calls)
	}
}
