package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/quota"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	valid := func() Config {
		return Config{Roles: []string{"web", "worker"}, AuthRate: 5, AuthBurst: 8, UserRate: 50, UserBurst: 100, BcryptCost: 10, ShutdownTimeout: 1, ClientIPHeader: "X-Forwarded-For"}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string // "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"worker only", func(c *Config) { c.Roles = []string{" Worker "} }, ""},
		{"unknown role", func(c *Config) { c.Roles = []string{"web", "cook"} }, `unknown role "cook"`},
		{"no roles", func(c *Config) { c.Roles = nil }, "SWITCHBOARD_ROLES is empty"},
		{"database without jwt secret", func(c *Config) { c.DatabaseURL = "postgres://db/x" }, "SWITCHBOARD_JWT_SECRET is required"},
		{"database with secrets", func(c *Config) {
			c.DatabaseURL = "postgres://db/x"
			c.JWTSecret, c.ClusterSecret = "0123456789abcdef", "fedcba9876543210"
		}, ""},
		{"database without cluster secret", func(c *Config) { c.DatabaseURL = "postgres://db/x"; c.JWTSecret = "0123456789abcdef" }, "SWITCHBOARD_CLUSTER_SECRET is required"},
		{"short cluster secret", func(c *Config) { c.ClusterSecret = "short" }, "SWITCHBOARD_CLUSTER_SECRET must be at least 16"},
		{"log level", func(c *Config) { c.LogLevel = "WARN" }, ""},
		{"unknown log level", func(c *Config) { c.LogLevel = "verbose" }, `SWITCHBOARD_LOG_LEVEL: "verbose"`},
		{"bad advertise address", func(c *Config) { c.AdvertiseAddr = "10.0.0.1" }, "SWITCHBOARD_ADVERTISE_ADDR"},
		{"mysql url", func(c *Config) { c.DatabaseURL = "mysql://db/x"; c.JWTSecret = "0123456789abcdef" }, "must start with postgres://"},
		{"unparsable url", func(c *Config) { c.DatabaseURL = "postgres://%zz"; c.JWTSecret = "0123456789abcdef" }, "DATABASE_URL is malformed"},
		{"short jwt secret", func(c *Config) { c.JWTSecret = "short" }, "at least 16"},
		{"bad proxy", func(c *Config) { c.TrustedProxies = []string{"10.0.0.0/33"} }, "SWITCHBOARD_TRUSTED_PROXIES"},
		{"bad log format", func(c *Config) { c.LogFormat = "xml" }, "SWITCHBOARD_LOG_FORMAT"},
		{"bad listen address", func(c *Config) { c.HTTPAddr = "8080" }, "listen address"},
		{"zero rate", func(c *Config) { c.AuthRate = 0 }, "SWITCHBOARD_AUTH_RATE"},
		{"zero user rate", func(c *Config) { c.UserRate = 0 }, "SWITCHBOARD_USER_RATE"},
		{"zero user burst", func(c *Config) { c.UserBurst = 0 }, "SWITCHBOARD_USER_BURST"},
		{"negative api key rate", func(c *Config) { c.APIKeyRate = -1 }, "SWITCHBOARD_API_KEY_RATE"},
		{"negative rate limit timeout", func(c *Config) { c.RateLimitTimeout = -1 }, "SWITCHBOARD_RATELIMIT_TIMEOUT"},
		{"no client ip header", func(c *Config) { c.ClientIPHeader = " " }, "SWITCHBOARD_CLIENT_IP_HEADER"},
		{"fly client ip header", func(c *Config) {
			c.ClientIPHeader = "Fly-Client-IP"
			c.TrustedProxies = []string{"172.16.0.0/12", "fdaa::1"}
		}, ""},
		{"allowed origins", func(c *Config) { c.AllowedOrigins = []string{"https://app.example.com", "http://localhost:3000/", "*"} }, ""},
		{"origin with a path", func(c *Config) { c.AllowedOrigins = []string{"https://app.example.com/ws"} }, "SWITCHBOARD_ALLOWED_ORIGINS"},
		{"negative ws rate", func(c *Config) { c.ConnFrameRate = -1 }, "SWITCHBOARD_WS_CONN_RATE"},
		{"negative ws conns", func(c *Config) { c.MaxConnsPerUser = -1 }, "SWITCHBOARD_WS_MAX_CONNS_PER_USER"},
		{"negative send queue", func(c *Config) { c.SendQueueBytes = -1 }, "SWITCHBOARD_WS_SEND_QUEUE_BYTES"},
		{"too many run workers", func(c *Config) { c.RunWorkers = 10001 }, "SWITCHBOARD_RUN_WORKERS"},
		{"run output over 1 MiB", func(c *Config) { c.RunOutputMax = 1<<20 + 1 }, "SWITCHBOARD_RUN_OUTPUT_MAX_BYTES"},
		{"run output under 1 KiB", func(c *Config) { c.RunOutputMax = 100 }, "SWITCHBOARD_RUN_OUTPUT_MAX_BYTES"},
		{"negative run workers", func(c *Config) { c.RunWorkers = -1 }, "SWITCHBOARD_RUN_WORKERS"},
		{"claim lead too long", func(c *Config) { c.ClaimLead = 6 * time.Second }, "SWITCHBOARD_CLAIM_LEAD"},
		{"negative claim lead", func(c *Config) { c.ClaimLead = -time.Second }, "SWITCHBOARD_CLAIM_LEAD"},
		{"negative stream retention", func(c *Config) { c.StreamMaxAge = -time.Hour }, "SWITCHBOARD_STREAM_MAX_AGE"},
		{"claim idle poll under a second", func(c *Config) { c.ClaimIdlePoll = 500 * time.Millisecond }, "SWITCHBOARD_CLAIM_IDLE_POLL"},
		{"claim idle poll over an hour", func(c *Config) { c.ClaimIdlePoll = 2 * time.Hour }, "SWITCHBOARD_CLAIM_IDLE_POLL"},
		{"claim idle poll of a minute", func(c *Config) { c.ClaimIdlePoll = time.Minute }, ""},
		{"registration closed", func(c *Config) { c.Registration = " Closed " }, ""},
		{"unknown registration", func(c *Config) { c.Registration = "members" }, `SWITCHBOARD_REGISTRATION: "members" is not open, invite or closed`},
		{"negative hash concurrency", func(c *Config) { c.HashConcurrency = -1 }, "SWITCHBOARD_PASSWORD_HASH_CONCURRENCY"},
		{"public url", func(c *Config) { c.PublicURL = "https://sb.example.com" }, ""},
		{"public url with a path", func(c *Config) { c.PublicURL = "https://sb.example.com/console" }, "SWITCHBOARD_PUBLIC_URL"},
		{"smtp url", func(c *Config) { c.SMTPURL = "smtps://u:p@mail.example.com?from=sb@example.com" }, ""},
		{"smtp url without from", func(c *Config) { c.SMTPURL = "smtp://u:secret@mail.example.com" }, "SWITCHBOARD_SMTP_URL: from="},
		{"river park after under a second", func(c *Config) { c.RiverParkAfter = 500 * time.Millisecond }, "SWITCHBOARD_RIVER_PARK_AFTER"},
		{"river park after over an hour", func(c *Config) { c.RiverParkAfter = 2 * time.Hour }, "SWITCHBOARD_RIVER_PARK_AFTER"},
		{"negative river park after", func(c *Config) { c.RiverParkAfter = -time.Second }, "SWITCHBOARD_RIVER_PARK_AFTER"},
		{"river never parks", func(c *Config) { c.RiverParkAfter = 0 }, ""},
		{"transaction pooling", func(c *Config) {
			c.DatabaseURL, c.DatabasePooling, c.ListenURL = "postgres://bouncer/x", " Transaction ", "postgres://db/x"
			c.JWTSecret, c.ClusterSecret = "0123456789abcdef", "fedcba9876543210"
		}, ""},
		{"unknown pooling", func(c *Config) { c.DatabasePooling = "statement" }, `SWITCHBOARD_DATABASE_POOLING: "statement"`},
		{"listen url without database", func(c *Config) { c.ListenURL = "postgres://db/x" }, "SWITCHBOARD_LISTEN_DATABASE_URL needs DATABASE_URL"},
		{"bad listen url", func(c *Config) {
			c.DatabaseURL, c.ListenURL = "postgres://db/x", "http://db/x"
			c.JWTSecret, c.ClusterSecret = "0123456789abcdef", "fedcba9876543210"
		}, "SWITCHBOARD_LISTEN_DATABASE_URL must start with postgres://"},
		{"quota over its bound", func(c *Config) { c.Quotas.APIKeys = 1001 }, "SWITCHBOARD_QUOTA_API_KEYS: 1001 is outside 1-1000"},
		{"negative quota", func(c *Config) { c.Quotas.QueuedRuns = -1 }, "SWITCHBOARD_QUOTA_QUEUED_RUNS"},
		{"origin without scheme", func(c *Config) { c.AllowedOrigins = []string{"app.example.com"} }, "SWITCHBOARD_ALLOWED_ORIGINS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			tc.mutate(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestDatabaseOnly: migrate and admin validate only the database and log
// settings; serve's secrets are not asked for, and a malformed URL's error
// does not repeat its password.
// TestPollOnly: only transaction pooling without a LISTEN URL polls.
func TestPollOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pooling, listen string
		want            bool
	}{{"session", "", false}, {"transaction", "", true}, {"transaction", "postgres://db/x", false}, {"session", "postgres://db/x", false}} {
		c := Config{DatabasePooling: tc.pooling, ListenURL: tc.listen}
		if got := c.PollOnly(); got != tc.want {
			t.Errorf("pooling %s, listen %q: PollOnly %v, want %v", tc.pooling, tc.listen, got, tc.want)
		}
	}
}

func TestDatabaseOnly(t *testing.T) {
	t.Parallel()
	c := Config{DatabaseURL: "postgres://db/x"}
	if err := c.ValidateDatabase(); err != nil {
		t.Fatalf("database only: %v", err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_JWT_SECRET is required") {
		t.Fatalf("serve must still require the secrets: %v", err)
	}
	c = Config{DatabaseURL: "postgres://u:s3cretpw@db/x\x7f", LogFormat: "xml"}
	err := c.ValidateDatabase()
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL is malformed") || !strings.Contains(err.Error(), "SWITCHBOARD_LOG_FORMAT") {
		t.Fatalf("bad database settings: %v", err)
	}
	if strings.Contains(err.Error(), "s3cretpw") {
		t.Fatalf("the error repeats the password: %v", err)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://postgres:s3cret@127.0.0.1:5432/switchboard?sslmode=disable": "postgres://postgres:xxxxx@127.0.0.1:5432/switchboard?sslmode=disable",
		"postgres://db/x?password=s3cret&sslmode=require":                       "postgres://db/x?password=xxxxx&sslmode=require",
		"postgres://db/x": "postgres://db/x",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRemoved(t *testing.T) {
	t.Setenv("SWITCHBOARD_ADMIN_EMAILS", "ops@example.com")
	if r := Removed(); len(r) != 1 || !strings.Contains(r[0], "switchboard admin grant") {
		t.Fatalf("Removed() = %v", r)
	}
}

func TestListenAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ addr, port, want string }{
		{"", "", ":8080"}, {"", "9000", ":9000"}, {"127.0.0.1:7000", "9000", "127.0.0.1:7000"},
	} {
		if got := (Config{HTTPAddr: tc.addr, Port: tc.port}).ListenAddr(); got != tc.want {
			t.Errorf("addr %q port %q: %q, want %q", tc.addr, tc.port, got, tc.want)
		}
	}
}

func TestLoadDefaults(t *testing.T) {
	for _, k := range []string{"DATABASE_URL", "SWITCHBOARD_ROLES", "SWITCHBOARD_AUTH_RATE", "SWITCHBOARD_AUTH_BURST", "SWITCHBOARD_USER_RATE", "SWITCHBOARD_USER_BURST", "SWITCHBOARD_JWT_SECRET"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if !c.HasRole(RoleWeb) || !c.HasRole(RoleWorker) || c.AuthRate != 5 || c.AuthBurst != 8 || c.UserRate != 50 || c.UserBurst != 100 || c.RateLimitTimeout != 250*time.Millisecond || !c.Embedded() {
		t.Fatalf("defaults: %+v", c)
	}
	if c.RiverParkAfter != 30*time.Second {
		t.Fatalf("SWITCHBOARD_RIVER_PARK_AFTER default %s, want 30s (README, docs/api.md)", c.RiverParkAfter)
	}
	if c.RunWorkers != 1000 {
		t.Fatalf("run workers: %d", c.RunWorkers)
	}
	if c.Registration != "open" || c.ResetLinkBase() != "http://localhost:8080" || c.SMTPURL != "" {
		t.Fatalf("registration %q, reset links at %q, smtp %q", c.Registration, c.ResetLinkBase(), c.SMTPURL)
	}
	if c.ClaimLead != 500*time.Millisecond {
		t.Fatalf("claim lead: %s", c.ClaimLead)
	}
	if c.StreamMaxEvents != 1000 || c.StreamMaxAge != 24*time.Hour {
		t.Fatalf("stream retention: %d events, %s", c.StreamMaxEvents, c.StreamMaxAge)
	}
	if c.WSLimits != (WSLimits{ConnFrameRate: 20, ConnFrameBurst: 40, UserFrameRate: 40, UserFrameBurst: 80, UserByteRate: 256 << 10, Strikes: 20, MaxConnsPerUser: 20, SendQueueBytes: 1 << 20, WriteWait: 10 * time.Second}) {
		t.Fatalf("websocket limits: %+v", c.WSLimits)
	}
	if c.Quotas.Limits() != quota.Defaults {
		t.Fatalf("quotas %+v, want quota.Defaults %+v (docs/api.md)", c.Quotas, quota.Defaults)
	}
}

func TestRolesFromFlyProcessGroup(t *testing.T) {
	t.Setenv("SWITCHBOARD_ROLES", "")
	os.Unsetenv("SWITCHBOARD_ROLES")
	t.Setenv("DATABASE_URL", "")
	os.Unsetenv("DATABASE_URL")
	t.Setenv("FLY_PROCESS_GROUP", "worker")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.HasRole(RoleWeb) || !c.HasRole(RoleWorker) {
		t.Fatalf("roles %v, want worker only", c.Roles)
	}
	t.Setenv("SWITCHBOARD_ROLES", "web")
	if c, _ = Load(); !c.HasRole(RoleWeb) || c.HasRole(RoleWorker) {
		t.Fatalf("explicit SWITCHBOARD_ROLES must win over FLY_PROCESS_GROUP: %v", c.Roles)
	}
}

// TestWebhookPrivateDefault: webhooks may reach private addresses by default
// with the embedded PostgreSQL (a laptop), not with DATABASE_URL; an explicit
// setting wins either way.
func TestWebhookPrivateDefault(t *testing.T) {
	for _, k := range []string{"DATABASE_URL", "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE", "SWITCHBOARD_JWT_SECRET", "SWITCHBOARD_CLUSTER_SECRET"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	check := func(want bool, what string) {
		t.Helper()
		c, err := Load()
		if err != nil || c.WebhookPrivate != want {
			t.Fatalf("%s: WebhookPrivate = %v (%v), want %v", what, c.WebhookPrivate, err, want)
		}
	}
	check(true, "embedded")
	t.Setenv("SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE", "false")
	check(false, "embedded, refused explicitly")
	os.Unsetenv("SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE")
	t.Setenv("DATABASE_URL", "postgres://db/x")
	t.Setenv("SWITCHBOARD_JWT_SECRET", "0123456789abcdef")
	t.Setenv("SWITCHBOARD_CLUSTER_SECRET", "fedcba9876543210")
	check(false, "DATABASE_URL")
	t.Setenv("SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE", "true")
	check(true, "DATABASE_URL, allowed explicitly")
}
