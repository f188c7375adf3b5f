package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/cmd/internal/replica"
	"github.com/switchboard/switchboard/infra/pgembed"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// runAdmin runs `switchboard admin <args>` against srv's database, as an
// operator would from a shell, and returns what it printed.
func runAdmin(t *testing.T, srv *testServer, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := adminCommand(context.Background(), srv.cfg, dbtest.Logger(t), args, nil, &out); err != nil {
		t.Fatalf("switchboard admin %v: %v", args, err)
	}
	return out.String()
}

// TestAdminChangesCountOnEveryReplica: a role granted, revoked or an account
// disabled through one replica (or the CLI) counts on the other from the
// very next request, with the tokens the users already hold.
func TestAdminChangesCountOnEveryReplica(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	a := startServer(t, testConfig(t, dbURL))
	b := startServer(t, testConfig(t, dbURL))
	boss, _ := registerUser(t, a, "boss@example.com")
	if status, _ := call(t, http.MethodGet, b.URL+"/v1/cluster/status", nil, boss); status != http.StatusForbidden {
		t.Fatalf("registering made an admin: %d", status)
	}
	if out := runAdmin(t, a, "grant", "Boss@Example.com"); !strings.Contains(out, "role admin") {
		t.Fatalf("grant printed %q", out)
	}
	if status, _ := call(t, http.MethodGet, b.URL+"/v1/cluster/status", nil, boss); status != http.StatusOK {
		t.Fatalf("granted admin on B: %d", status)
	}

	helper, helperID := registerUser(t, b, "helper@example.com")
	if status, body := call(t, http.MethodPatch, a.URL+"/v1/admin/users/"+helperID, map[string]any{"role": "admin"}, boss); status != http.StatusOK {
		t.Fatalf("grant via A: %d %v", status, body)
	}
	if status, _ := call(t, http.MethodGet, b.URL+"/v1/admin/users", nil, helper); status != http.StatusOK {
		t.Fatalf("helper as admin on B: %d", status)
	}
	if status, body := call(t, http.MethodPatch, a.URL+"/v1/admin/users/"+helperID, map[string]any{"role": "user"}, boss); status != http.StatusOK {
		t.Fatalf("revoke via A: %d %v", status, body)
	}
	if status, _ := call(t, http.MethodGet, b.URL+"/v1/admin/users", nil, helper); status != http.StatusForbidden {
		t.Fatalf("revoked via A, admin call on B: %d, want 403", status)
	}

	if status, body := call(t, http.MethodPatch, a.URL+"/v1/admin/users/"+helperID, map[string]any{"disabled": true}, boss); status != http.StatusOK {
		t.Fatalf("disable via A: %d %v", status, body)
	}
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/v1/me", nil},
		{http.MethodGet, "/v1/tasks", nil},
		{http.MethodPost, "/v1/tasks", map[string]any{"name": "t", "schedule": "@hourly", "action": map[string]any{"type": "publish", "event": "tick"}}},
		{http.MethodPost, "/v1/ws/ticket", nil},
		{http.MethodPost, "/v1/events", map[string]any{"event": "hello", "to": helperID}},
	} {
		if status, body := call(t, r.method, b.URL+r.path, r.body, helper); status != http.StatusUnauthorized {
			t.Errorf("disabled account on B: %s %s = %d %v, want 401", r.method, r.path, status, body)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, b.URL+"/riverui/", nil)
	req.SetBasicAuth("boss@example.com", "correct horse")
	requireStatus(t, req, http.StatusOK)
	runAdmin(t, b, "revoke", "boss@example.com")
	if status, _ := call(t, http.MethodGet, a.URL+"/v1/cluster/status", nil, boss); status != http.StatusForbidden {
		t.Fatalf("revoked by the CLI, admin call on A: %d, want 403", status)
	}
	requireStatus(t, req, http.StatusForbidden) // the cached basic-auth login too
}

func requireStatus(t *testing.T, req *http.Request, want int) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d", req.Method, req.URL, res.StatusCode, want)
	}
}

func TestAdminCommand(t *testing.T) {
	t.Parallel()
	srv := startServer(t, testConfig(t, dbtest.NewDatabaseURL(t)))
	registerUser(t, srv, "someone@example.com")
	if out := runAdmin(t, srv, "list"); !strings.Contains(out, "no admins") {
		t.Fatalf("list with no admins: %q", out)
	}
	runAdmin(t, srv, "grant", "someone@example.com")
	if out := runAdmin(t, srv, "list"); !strings.Contains(out, "someone@example.com") {
		t.Fatalf("list: %q", out)
	}
	if out := runAdmin(t, srv, "disable", "someone@example.com"); !strings.Contains(out, "disabled true") {
		t.Fatalf("disable: %q", out)
	}
	if out := runAdmin(t, srv, "enable", "someone@example.com"); !strings.Contains(out, "disabled false") {
		t.Fatalf("enable: %q", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"grant", "nobody@example.com"}, "register it first"},
		{[]string{"grant", "opſ@example.com"}, "ASCII"},
		{[]string{"grant"}, "usage"},
		{[]string{"promote", "someone@example.com"}, "unknown subcommand"},
		{nil, "missing subcommand"},
	} {
		err := adminCommand(context.Background(), srv.cfg, dbtest.Logger(t), tc.args, nil, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("admin %v: %v, want an error mentioning %q", tc.args, err, tc.want)
		}
	}
}

// TestAdminCommandOnTheEmbeddedDatabase: with no DATABASE_URL the command
// attaches to the PostgreSQL a running replica started in the data
// directory; the replica's startup log does not hold that database's
// password.
func TestAdminCommandOnTheEmbeddedDatabase(t *testing.T) {
	t.Parallel()
	if pgembed.FindBinDir() == "" {
		t.Skip("no PostgreSQL binaries installed")
	}
	cfg := testConfig(t, "")
	cfg.DatabaseURL, cfg.JWTSecret, cfg.ClusterSecret = "", "", ""
	var logs replica.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, err := newApp(context.Background(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		a.Stop()
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(a.Stop) })
	a.logBanner(&logs)
	srv := &testServer{app: a, URL: "http://" + a.Addr()}

	token, _ := registerUser(t, srv, "first@example.com")
	if status, _ := call(t, http.MethodGet, srv.URL+"/v1/admin/users", nil, token); status != http.StatusForbidden {
		t.Fatalf("before grant: %d", status)
	}
	var out bytes.Buffer
	if err := adminCommand(context.Background(), cfg, dbtest.Logger(t), []string{"grant", "first@example.com"}, nil, &out); err != nil {
		t.Fatalf("grant on the embedded database: %v", err)
	}
	if status, _ := call(t, http.MethodGet, srv.URL+"/v1/admin/users", nil, token); status != http.StatusOK {
		t.Fatalf("after grant: %d", status)
	}
	password, err := os.ReadFile(filepath.Join(cfg.DataDir, "postgres.password"))
	if err != nil || len(bytes.TrimSpace(password)) < 8 {
		t.Fatalf("password file: %v", err)
	}
	if strings.Contains(logs.String(), string(bytes.TrimSpace(password))) {
		t.Fatalf("the log holds the database password:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "postgres://postgres:xxxxx@") {
		t.Fatalf("the banner lacks the masked database URL:\n%s", logs.String())
	}
}

// TestDatabaseOnlyCommands: migrate and admin need DATABASE_URL and nothing
// else; --help says what serve requires with it.
func TestDatabaseOnlyCommands(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "switchboard")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	env := func(extra ...string) []string {
		var out []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "SWITCHBOARD_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
				out = append(out, kv)
			}
		}
		return append(out, extra...)
	}
	dbURL := dbtest.NewEmptyDatabaseURL(t)
	t.Run("migrate without secrets", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(bin, "migrate")
		cmd.Env = env("DATABASE_URL="+dbURL, "SWITCHBOARD_LOG_FORMAT=text")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("migrate: %v\n%s", err, out)
		}
	})
	t.Run("admin without secrets", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(bin, "admin", "grant", "nobody@example.com")
		cmd.Env = env("DATABASE_URL="+dbURL, "SWITCHBOARD_LOG_FORMAT=text")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "register it first") || strings.Contains(string(out), "SECRET") {
			t.Fatalf("admin grant of an unknown account: %v\n%s", err, out)
		}
	})
	t.Run("admin usage", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(bin, "admin")
		cmd.Env = env()
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "missing subcommand") {
			t.Fatalf("admin without a subcommand: %d\n%s", cmd.ProcessState.ExitCode(), out)
		}
	})
	t.Run("serve still requires the secrets", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(bin, "serve")
		cmd.Env = env("DATABASE_URL=" + dbURL)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "SWITCHBOARD_JWT_SECRET is required") {
			t.Fatalf("serve without secrets: %v\n%s", err, out)
		}
	})
	t.Run("help says what DATABASE_URL requires", func(t *testing.T) {
		t.Parallel()
		out, err := exec.Command(bin, "--help").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"With DATABASE_URL set, serve also requires SWITCHBOARD_JWT_SECRET", "migrate and admin need only DATABASE_URL", "switchboard admin grant <email>"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("--help lacks %q", want)
			}
		}
	})
	t.Run("the removed admin list warns", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(bin, "migrate")
		cmd.Env = env("DATABASE_URL="+dbURL, "SWITCHBOARD_ADMIN_EMAILS=ops@example.com", "SWITCHBOARD_LOG_FORMAT=text")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SWITCHBOARD_ADMIN_EMAILS is no longer read") {
			t.Fatalf("migrate with SWITCHBOARD_ADMIN_EMAILS: %v\n%s", err, out)
		}
	})
}
