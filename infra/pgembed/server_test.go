package pgembed

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/freeport"
)

func TestFindBinDirPrefersNewest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		want int
	}{{"/usr/lib/postgresql/15/bin", 15}, {"/opt/homebrew/opt/postgresql@16/bin", 16}, {"/usr/pgsql-9/bin", 9}} {
		if got := versionOf(tc.path); got != tc.want {
			t.Errorf("versionOf(%q) = %d, want %d", tc.path, got, tc.want)
		}
	}
}

// TestStartAttachRestart: data survives a restart; a second process on the
// same directory attaches instead of starting another server.
func TestStartAttachRestart(t *testing.T) {
	t.Parallel()
	if FindBinDir() == "" {
		t.Skip("no PostgreSQL binaries installed")
	}
	ctx := context.Background()
	dir := t.TempDir()
	first, err := Start(ctx, Options{Dir: dir, Ephemeral: true})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = first.Stop() })
	if fi, err := os.Stat(dir); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		t.Fatalf("the data dir must stay ours (the postgres account could replace the secrets in it): %v", err)
	}
	mustExec(t, first.URL(), "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")

	second, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	if second.Owned() || second.URL() != first.URL() {
		t.Fatalf("second start did not attach: owned=%v url=%s", second.Owned(), second.URL())
	}
	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, first.URL(), "SELECT 1") // stopping an attached server leaves it running

	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	again, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(func() { _ = again.Stop() })
	conn, err := pgx.Connect(ctx, again.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("data after restart: %d %v", v, err)
	}
}

func mustExec(t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestFixedPortKeepsURL: with Options.Port the URL survives a stop and start,
// so clients holding it reconnect on their own.
func TestFixedPortKeepsURL(t *testing.T) {
	t.Parallel()
	if FindBinDir() == "" {
		t.Skip("no PostgreSQL binaries installed")
	}
	ctx := context.Background()
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first, err := Start(ctx, Options{Dir: dir, Ephemeral: true, Port: port})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if want := fmt.Sprintf("127.0.0.1:%d/", port); !strings.Contains(first.URL(), want) {
		t.Fatalf("URL %s does not use port %d", first.URL(), port)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	again, err := Start(ctx, Options{Dir: dir, Ephemeral: true, Port: port})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(func() { _ = again.Stop() })
	if again.URL() != first.URL() {
		t.Fatalf("URL changed across restart: %s then %s", first.URL(), again.URL())
	}
	mustExec(t, again.URL(), "SELECT 1")
}
