package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/cmd/internal/replica"
	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/pgembed"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

func TestTokenFromOneReplicaWorksOnAnother(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabaseURL(t)
	a := startServer(t, testConfig(t, dbURL))
	b := startServer(t, testConfig(t, dbURL))
	token, id := registerUser(t, a, "replicas@example.com")
	status, body := call(t, http.MethodGet, b.URL+"/v1/me", nil, token)
	if status != http.StatusOK || body["id"] != id {
		t.Fatalf("token from A on B: %d %v", status, body)
	}
	status, body = call(t, http.MethodPost, b.URL+"/v1/auth/login", map[string]string{"email": "replicas@example.com", "password": "correct horse"}, "")
	if status != http.StatusOK {
		t.Fatalf("login on B: %d %v", status, body)
	}
}

func TestFourReplicasStartAtOnceOnAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewEmptyDatabaseURL(t)
	cfgs := make([]struct{ cfg config.Config }, 4)
	for i := range cfgs {
		cfgs[i].cfg = testConfig(t, dbURL)
	}
	var wg sync.WaitGroup
	servers := make([]*app, len(cfgs))
	errs := make([]error, len(cfgs))
	for i := range cfgs {
		wg.Go(func() {
			a, err := newApp(context.Background(), cfgs[i].cfg, dbtest.Logger(t))
			if err == nil {
				err = a.Start(context.Background())
				t.Cleanup(a.Stop)
			}
			servers[i], errs[i] = a, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		status, body := call(t, http.MethodGet, "http://"+servers[i].Addr()+"/healthz/ready", nil, "")
		if status != http.StatusOK {
			t.Fatalf("replica %d not ready: %d %v", i, status, body)
		}
	}
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, dbtest.NewEmptyDatabaseURL(t))
	for i := range 2 {
		if err := migrate(context.Background(), cfg, dbtest.Logger(t)); err != nil {
			t.Fatalf("migrate run %d: %v", i+1, err)
		}
	}
}

// TestEmbeddedRestartKeepsData is the first-run experience: no DATABASE_URL,
// a private Postgres in the data directory; data and secrets survive a
// restart, so a token and the password still work.
func TestEmbeddedRestartKeepsData(t *testing.T) {
	t.Parallel()
	if pgembed.FindBinDir() == "" {
		t.Skip("no PostgreSQL binaries installed")
	}
	cfg := testConfig(t, "")
	cfg.DatabaseURL, cfg.JWTSecret, cfg.ClusterSecret = "", "", ""
	first := startServer(t, cfg)
	token, id := registerUser(t, first, "embedded@example.com")
	first.Stop()

	second := startServer(t, cfg)
	status, body := call(t, http.MethodPost, second.URL+"/v1/auth/login", map[string]string{"email": "embedded@example.com", "password": "correct horse"}, "")
	if status != http.StatusOK {
		t.Fatalf("login after restart: %d %v", status, body)
	}
	if status, body := call(t, http.MethodGet, second.URL+"/v1/me", nil, token); status != http.StatusOK || body["id"] != id {
		t.Fatalf("token from before the restart: %d %v", status, body)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.DataDir, "jwt.secret")); err != nil || len(strings.TrimSpace(string(b))) < 32 {
		t.Fatalf("jwt secret not kept in the data dir: %v", err)
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "switchboard")
	if err := replica.Build(context.Background(), replica.BuildOptions{Output: bin, LDFlags: "-X main.version=v9.9.9"}); err != nil {
		t.Fatalf("build: %v", err)
	}
	t.Run("version", func(t *testing.T) {
		t.Parallel()
		out, err := exec.Command(bin, "version").Output()
		if err != nil || strings.TrimSpace(string(out)) != "v9.9.9" {
			t.Fatalf("version: %q %v", out, err)
		}
	})
	t.Run("version -v", func(t *testing.T) {
		t.Parallel()
		out, err := exec.Command(bin, "version", "-v").Output()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err != nil || len(lines) != 4 || lines[0] != "version v9.9.9" || !strings.HasPrefix(lines[1], "revision ") ||
			lines[3] != "platform "+runtime.GOOS+"/"+runtime.GOARCH {
			t.Fatalf("version -v: %q %v", out, err)
		}
		if err := exec.Command(bin, "version", "--bogus").Run(); err == nil {
			t.Fatal("version --bogus exited 0")
		}
	})
	t.Run("openapi needs no database or configuration", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(bin, "openapi")
		cmd.Env = []string{"DATABASE_URL=mysql://not-read"}
		out, err := cmd.Output()
		var doc struct{ OpenAPI string }
		if err != nil || json.Unmarshal(out, &doc) != nil || doc.OpenAPI != "3.1.0" {
			t.Fatalf("openapi: %v %.200s", err, out)
		}
	})
	t.Run("help lists every variable", func(t *testing.T) {
		t.Parallel()
		out, err := exec.Command(bin, "--help").Output()
		if err != nil {
			t.Fatalf("help: %v", err)
		}
		for _, v := range []string{"DATABASE_URL", "PORT", "SWITCHBOARD_HTTP_ADDR", "SWITCHBOARD_ROLES", "SWITCHBOARD_JWT_SECRET",
			"SWITCHBOARD_CLUSTER_SECRET", "SWITCHBOARD_ADVERTISE_ADDR", "SWITCHBOARD_TRUSTED_PROXIES",
			"SWITCHBOARD_AUTH_RATE", "SWITCHBOARD_AUTH_BURST", "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE", "SWITCHBOARD_DATA_DIR", "SWITCHBOARD_LOG_FORMAT",
			"SWITCHBOARD_REGISTRATION", "SWITCHBOARD_PUBLIC_URL", "SWITCHBOARD_SMTP_URL", "SWITCHBOARD_PASSWORD_HASH_CONCURRENCY",
			"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER"} {
			if !strings.Contains(string(out), v) {
				t.Errorf("--help does not list %s", v)
			}
		}
	})
	for _, tc := range []struct{ name, env, want string }{
		{"bad roles", "SWITCHBOARD_ROLES=web,cook", "unknown role"},
		{"malformed database url", "DATABASE_URL=mysql://x", "DATABASE_URL must start with postgres://"},
		{"missing jwt secret", "DATABASE_URL=postgres://localhost/x", "SWITCHBOARD_JWT_SECRET is required"},
		{"missing cluster secret", "DATABASE_URL=postgres://localhost/x", "SWITCHBOARD_CLUSTER_SECRET is required"},
		{"unknown trace exporter", "OTEL_TRACES_EXPORTER=zipkin", "OTEL_TRACES_EXPORTER"},
		{"unknown registration policy", "SWITCHBOARD_REGISTRATION=members", `SWITCHBOARD_REGISTRATION: "members" is not open, invite or closed`},
		{"smtp url without a sender", "SWITCHBOARD_SMTP_URL=smtp://mail.example.com", "SWITCHBOARD_SMTP_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(bin, "serve")
			cmd.Env = append(os.Environ(), tc.env)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("want failure mentioning %q, got %v: %s", tc.want, err, out)
			}
		})
	}
}
