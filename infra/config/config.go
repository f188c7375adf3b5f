// Package config owns Switchboard's configuration: one struct read from the
// environment with envconfig, validated once at start in cmd/.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/switchboard/switchboard/infra/mail"
)

// Role names accepted in SWITCHBOARD_ROLES.
const (
	RoleWeb    = "web"
	RoleWorker = "worker"
)

// Config is every setting of the service. Field tags name the environment
// variable; `switchboard --help` prints them with their defaults.
type Config struct {
	DatabaseURL      string        `envconfig:"DATABASE_URL" desc:"PostgreSQL URL; unset starts a private embedded PostgreSQL in SWITCHBOARD_DATA_DIR"`
	DatabasePooling  string        `envconfig:"SWITCHBOARD_DATABASE_POOLING" default:"session" desc:"session (DATABASE_URL is a direct or session-pooled connection) or transaction (PgBouncer transaction mode: no named prepared statements; LISTEN only on SWITCHBOARD_LISTEN_DATABASE_URL, else poll-only)"`
	ListenURL        string        `envconfig:"SWITCHBOARD_LISTEN_DATABASE_URL" desc:"direct (or session-pooled) PostgreSQL URL for the LISTEN connections of the realtime bus and River; default DATABASE_URL, or none (poll-only) when SWITCHBOARD_DATABASE_POOLING=transaction"`
	Port             string        `envconfig:"PORT" desc:"port to listen on (used when SWITCHBOARD_HTTP_ADDR is unset)"`
	HTTPAddr         string        `envconfig:"SWITCHBOARD_HTTP_ADDR" desc:"listen address; default :8080 (or :$PORT)"`
	Roles            []string      `envconfig:"SWITCHBOARD_ROLES" default:"web,worker" desc:"web (HTTP API, WebSockets), worker (claims and runs jobs), or both; unset on Fly.io: FLY_PROCESS_GROUP"`
	JWTSecret        string        `envconfig:"SWITCHBOARD_JWT_SECRET" desc:"HMAC key for access tokens, 16+ characters; required by serve when DATABASE_URL is set (the same on every replica); generated in SWITCHBOARD_DATA_DIR when embedded"`
	ClusterSecret    string        `envconfig:"SWITCHBOARD_CLUSTER_SECRET" desc:"HMAC key signing node-to-node calls, 16+ characters; required by serve when DATABASE_URL is set (the same on every replica); generated when embedded"`
	AdvertiseAddr    string        `envconfig:"SWITCHBOARD_ADVERTISE_ADDR" desc:"host:port other nodes use to reach this one; default FLY_PRIVATE_IP or the pod IP plus the listen port"`
	FlyPrivateIP     string        `envconfig:"FLY_PRIVATE_IP" desc:"set by Fly.io: the Machine's private address, advertised with the listen port"`
	PodIP            string        `envconfig:"POD_IP" desc:"set by the Helm chart from the downward API: advertised with the listen port"`
	TrustedProxies   []string      `envconfig:"SWITCHBOARD_TRUSTED_PROXIES" desc:"comma-separated CIDRs of proxies whose client IP header is believed"`
	ClientIPHeader   string        `envconfig:"SWITCHBOARD_CLIENT_IP_HEADER" default:"X-Forwarded-For" desc:"header a trusted proxy sets: X-Forwarded-For or Fly-Client-IP"`
	AuthRate         float64       `envconfig:"SWITCHBOARD_AUTH_RATE" default:"5" desc:"requests per second per client IP on /v1/auth/*"`
	AuthBurst        int           `envconfig:"SWITCHBOARD_AUTH_BURST" default:"8" desc:"burst allowed per client IP on /v1/auth/*"`
	UserRate         float64       `envconfig:"SWITCHBOARD_USER_RATE" default:"50" desc:"requests per second per account on authenticated /v1 routes: its user tokens and all its API keys share it"`
	UserBurst        int           `envconfig:"SWITCHBOARD_USER_BURST" default:"100" desc:"burst allowed per account on authenticated /v1 routes"`
	APIKeyRate       float64       `envconfig:"SWITCHBOARD_API_KEY_RATE" default:"50" desc:"requests per second per API key, besides its account's limit (SWITCHBOARD_USER_RATE), which its tokens and all its keys share"`
	APIKeyBurst      int           `envconfig:"SWITCHBOARD_API_KEY_BURST" default:"100" desc:"burst allowed per API key"`
	BodyReadTimeout  time.Duration `envconfig:"SWITCHBOARD_BODY_READ_TIMEOUT" default:"5s" desc:"how long a client has to send a request's body after its headers (1s-10m); slower, an API route answers 408"`
	RateLimitTimeout time.Duration `envconfig:"SWITCHBOARD_RATELIMIT_TIMEOUT" default:"250ms" desc:"how long a rate limit decision waits for Postgres before this replica counts on its own"`
	RunOutputMax     int           `envconfig:"SWITCHBOARD_RUN_OUTPUT_MAX_BYTES" default:"65536" desc:"largest webhook JSON response kept as a run's output (1024-1048576); a larger one is kept cut to this size, as a JSON string, flagged output_truncated"`
	WebhookPrivate   bool          `envconfig:"SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE" desc:"allow webhook targets on loopback, private, link-local and CGNAT addresses (cloud metadata stays refused); default true with the embedded PostgreSQL (a laptop: point a task at a local server), false with DATABASE_URL"`
	RunWorkers       int           `envconfig:"SWITCHBOARD_RUN_WORKERS" default:"1000" desc:"task runs one worker replica works at once (1-10000); their run-state writes are batched (about 4 connections for all of them), so the pool (pool_max_conns in DATABASE_URL, default 25) need not grow with this"`
	ClaimLead        time.Duration `envconfig:"SWITCHBOARD_CLAIM_LEAD" default:"500ms" desc:"how long before its tick a task with overlap allow may be claimed (0-5s; 0: at the tick); the run still starts at its tick, and a burst of ticks due at once is claimed before it comes"`
	RunRetention     time.Duration `envconfig:"SWITCHBOARD_RUN_RETENTION" default:"720h" desc:"how long finished task runs are kept before maintenance prunes them"`
	StreamMaxEvents  int           `envconfig:"SWITCHBOARD_STREAM_MAX_EVENTS" default:"1000" desc:"events kept per stream (a user's, a room's) for resume and GET /v1/history"`
	StreamMaxAge     time.Duration `envconfig:"SWITCHBOARD_STREAM_MAX_AGE" default:"24h" desc:"how long a stream's events are kept for resume and GET /v1/history"`
	ReadBytes        int           `envconfig:"SWITCHBOARD_READ_BYTES" default:"1048576" desc:"bytes of stored events one read may bring (a GET /v1/history page; one read of WebSocket catch-up, shared by its streams); a read always brings one event, so at most this plus one event; at least 65536"`
	ClaimIdlePoll    time.Duration `envconfig:"SWITCHBOARD_CLAIM_IDLE_POLL" default:"30s" desc:"longest a worker replica's claim loop waits before it looks for due tasks again while its LISTEN connection is up (1s-1h); a task created or made due sooner on any replica wakes every claim loop at once, and each wakes for the earliest tick it knows; poll-only or with LISTEN down it looks every second"`
	RiverParkAfter   time.Duration `envconfig:"SWITCHBOARD_RIVER_PARK_AFTER" default:"30s" desc:"how long a worker replica's River client runs with nothing to do before it parks: it stops polling, electing and reporting until work is due (an idle replica then costs about one database round trip a second instead of three); a job inserted or released on any replica, a tick or waiting job within 5s, a fetchable job nobody announced (found on the claim loop's next look) or jobs rescued from a dead node start it again (0: never park; 1s-1h; poll-only replicas never park)"`
	DataDir          string        `envconfig:"SWITCHBOARD_DATA_DIR" default:"./.switchboard" desc:"embedded PostgreSQL data and generated secrets"`
	LogFormat        string        `envconfig:"SWITCHBOARD_LOG_FORMAT" desc:"json or text; default text on a terminal, json otherwise"`
	LogLevel         string        `envconfig:"SWITCHBOARD_LOG_LEVEL" default:"info" desc:"debug, info, warn or error; each HTTP request and River's routine messages are logged at debug"`
	ShutdownTimeout  time.Duration `envconfig:"SWITCHBOARD_SHUTDOWN_TIMEOUT" default:"25s" desc:"how long SIGTERM waits for requests and running jobs"`
	BcryptCost       int           `envconfig:"SWITCHBOARD_BCRYPT_COST" default:"10" desc:"bcrypt cost of password hashes (4-31)"`
	HashConcurrency  int           `envconfig:"SWITCHBOARD_PASSWORD_HASH_CONCURRENCY" desc:"bcrypt hashes and checks one replica runs at once (logins, registrations, password changes); more wait up to 1s, then answer 503; default the number of CPUs"`
	Registration     string        `envconfig:"SWITCHBOARD_REGISTRATION" default:"open" desc:"who may register: open (anyone), invite (only with an invite token for the address) or closed (accounts come from switchboard admin create-user)"`
	PublicURL        string        `envconfig:"SWITCHBOARD_PUBLIC_URL" desc:"scheme://host[:port] people reach this service at, for the links in password reset mail and answers; default http://localhost:<listen port>"`
	SMTPURL          string        `envconfig:"SWITCHBOARD_SMTP_URL" desc:"smtp://[user:password@]host[:port]?from=address (STARTTLS when offered; port 587) or smtps://... (TLS; port 465): where POST /v1/auth/forgot mails reset links; unset: no mail is sent"`
	AllowedOrigins   []string      `envconfig:"SWITCHBOARD_ALLOWED_ORIGINS" desc:"comma-separated origins (scheme://host[:port]) browsers may call the API from (CORS; listed origins with credentials, * without) and open WebSockets from, or *; default: no cross-origin API calls, WebSockets from the request's own host"`
	WSLimits
	Quotas
	Tracing
}

// WSLimits bound what clients send over WebSockets. Frame limits are token
// buckets per connection and per user on one replica; a refused frame is
// answered with an error event, and a connection that keeps sending
// refused frames is closed with 4029.
type WSLimits struct {
	ConnFrameRate   float64       `envconfig:"SWITCHBOARD_WS_CONN_RATE" default:"20" desc:"frames per second one WebSocket may send"`
	ConnFrameBurst  int           `envconfig:"SWITCHBOARD_WS_CONN_BURST" default:"40" desc:"burst of frames one WebSocket may send"`
	UserFrameRate   float64       `envconfig:"SWITCHBOARD_WS_USER_RATE" default:"40" desc:"frames per second from all of one user's WebSockets on one replica"`
	UserFrameBurst  int           `envconfig:"SWITCHBOARD_WS_USER_BURST" default:"80" desc:"burst of frames from all of one user's WebSockets on one replica"`
	UserByteRate    int           `envconfig:"SWITCHBOARD_WS_USER_BYTES_RATE" default:"262144" desc:"bytes per second of frames from all of one user's WebSockets on one replica (burst: 4 s worth, at least one 64 KiB frame)"`
	Strikes         int           `envconfig:"SWITCHBOARD_WS_LIMIT_STRIKES" default:"20" desc:"refused frames in a row after which a WebSocket is closed with 4029"`
	MaxConnsPerUser int           `envconfig:"SWITCHBOARD_WS_MAX_CONNS_PER_USER" default:"20" desc:"WebSockets one user may hold open on one replica; more are refused with 429"`
	SendQueueBytes  int           `envconfig:"SWITCHBOARD_WS_SEND_QUEUE_BYTES" default:"1048576" desc:"bytes that may wait for a WebSocket that reads slowly; past it the socket is closed with 3008 and the client resumes from its offsets"`
	WriteWait       time.Duration `envconfig:"SWITCHBOARD_WS_WRITE_WAIT" default:"10s" desc:"how long a write to a WebSocket that is not read may block before the socket is cut; a slow consumer's 3008 close frame reaches it only if it reads again within this time"`
}

// Load reads the environment into a Config and validates it for serve.
func Load() (Config, error) { return load((*Config).Validate) }

// LoadDatabase reads the environment for the commands that only use the
// database (migrate, admin): the secrets and the serving settings are not
// required or checked.
func LoadDatabase() (Config, error) { return load((*Config).ValidateDatabase) }

func load(validate func(*Config) error) (Config, error) {
	c, err := read()
	if err != nil {
		return Config{}, err
	}
	if err := validate(&c); err != nil {
		return Config{}, err
	}
	return c, nil
}

func read() (Config, error) {
	var c Config
	if err := envconfig.Process("", &c); err != nil {
		return Config{}, fmt.Errorf("read environment: %w", err)
	}
	// The embedded PostgreSQL means a laptop, where webhook targets are
	// local servers; a deployment (DATABASE_URL) refuses them unless asked.
	if _, set := os.LookupEnv("SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE"); !set {
		c.WebhookPrivate = c.Embedded()
	}
	// Fly.io cannot set env per process group; it names the group instead.
	if _, set := os.LookupEnv("SWITCHBOARD_ROLES"); !set {
		if g := os.Getenv("FLY_PROCESS_GROUP"); g == RoleWeb || g == RoleWorker {
			c.Roles = []string{g}
		}
	}
	return c, nil
}

// Removed names variables that are no longer read and are set in the
// environment, each with what to do instead, for a warning at start.
func Removed() []string {
	var out []string
	if _, set := os.LookupEnv("SWITCHBOARD_ADMIN_EMAILS"); set {
		out = append(out, "SWITCHBOARD_ADMIN_EMAILS is no longer read: registering never grants admin. "+
			"Existing admins keep their role; grant others with `switchboard admin grant <email>` (docs/security.md)")
	}
	return out
}

// Usage prints every variable with its default and description.
func Usage() error {
	var c Config
	return envconfig.Usage("", &c)
}

// Pooling values of SWITCHBOARD_DATABASE_POOLING.
const (
	PoolingSession     = "session"
	PoolingTransaction = "transaction"
)

// TransactionPooled reports whether DATABASE_URL goes through a
// transaction-mode pooler: no session state survives a transaction.
func (c Config) TransactionPooled() bool { return c.DatabasePooling == PoolingTransaction }

// PollOnly reports whether nothing may LISTEN: transaction pooling and no
// SWITCHBOARD_LISTEN_DATABASE_URL.
func (c Config) PollOnly() bool { return c.TransactionPooled() && c.ListenURL == "" }

// Embedded reports whether the service runs its own PostgreSQL.
func (c Config) Embedded() bool { return c.DatabaseURL == "" }

// HasRole reports whether this process plays role r.
func (c Config) HasRole(r string) bool { return slices.Contains(c.Roles, r) }

// ListenAddr is SWITCHBOARD_HTTP_ADDR, else :$PORT, else :8080.
func (c Config) ListenAddr() string {
	switch {
	case c.HTTPAddr != "":
		return c.HTTPAddr
	case c.Port != "":
		return ":" + c.Port
	}
	return ":8080"
}

// Validate checks values envconfig cannot, with messages naming the
// variable: everything serve needs.
func (c *Config) Validate() error {
	errs := []error{c.ValidateDatabase()}
	if len(c.Roles) == 0 {
		errs = append(errs, errors.New("SWITCHBOARD_ROLES is empty: use web, worker or web,worker"))
	}
	for i, r := range c.Roles {
		r = strings.ToLower(strings.TrimSpace(r))
		c.Roles[i] = r
		if r != RoleWeb && r != RoleWorker {
			errs = append(errs, fmt.Errorf("SWITCHBOARD_ROLES: unknown role %q (use web, worker or web,worker)", r))
		}
	}
	if c.DatabaseURL != "" {
		if c.JWTSecret == "" {
			errs = append(errs, errors.New("SWITCHBOARD_JWT_SECRET is required when DATABASE_URL is set (every replica must share it)"))
		}
		if c.ClusterSecret == "" {
			errs = append(errs, errors.New("SWITCHBOARD_CLUSTER_SECRET is required when DATABASE_URL is set (every replica must share it; it signs node-to-node calls)"))
		}
	}
	if c.JWTSecret != "" && len(c.JWTSecret) < 16 {
		errs = append(errs, errors.New("SWITCHBOARD_JWT_SECRET must be at least 16 characters"))
	}
	if c.ClusterSecret != "" && len(c.ClusterSecret) < 16 {
		errs = append(errs, errors.New("SWITCHBOARD_CLUSTER_SECRET must be at least 16 characters"))
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseAddr); err != nil {
			errs = append(errs, fmt.Errorf("SWITCHBOARD_ADVERTISE_ADDR %q is not host:port: %v", c.AdvertiseAddr, err))
		}
	}
	if _, _, err := net.SplitHostPort(c.ListenAddr()); err != nil {
		errs = append(errs, fmt.Errorf("listen address %q: %v", c.ListenAddr(), err))
	}
	if c.AuthRate <= 0 {
		errs = append(errs, errors.New("SWITCHBOARD_AUTH_RATE must be positive"))
	}
	if c.AuthBurst < 1 {
		errs = append(errs, errors.New("SWITCHBOARD_AUTH_BURST must be at least 1"))
	}
	if c.UserRate <= 0 {
		errs = append(errs, errors.New("SWITCHBOARD_USER_RATE must be positive"))
	}
	if c.UserBurst < 1 {
		errs = append(errs, errors.New("SWITCHBOARD_USER_BURST must be at least 1"))
	}
	if c.APIKeyRate < 0 || c.APIKeyBurst < 0 { // zero: the default
		errs = append(errs, errors.New("SWITCHBOARD_API_KEY_RATE and SWITCHBOARD_API_KEY_BURST must be positive"))
	}
	if c.BodyReadTimeout != 0 && (c.BodyReadTimeout < time.Second || c.BodyReadTimeout > 10*time.Minute) {
		errs = append(errs, fmt.Errorf("SWITCHBOARD_BODY_READ_TIMEOUT: %s is outside 1s-10m", c.BodyReadTimeout))
	}
	if c.RateLimitTimeout < 0 {
		errs = append(errs, errors.New("SWITCHBOARD_RATELIMIT_TIMEOUT must not be negative"))
	}
	if strings.TrimSpace(c.ClientIPHeader) == "" {
		errs = append(errs, errors.New("SWITCHBOARD_CLIENT_IP_HEADER is empty: use X-Forwarded-For or Fly-Client-IP"))
	}
	for _, p := range c.TrustedProxies {
		if _, err := ParseCIDROrIP(p); err != nil {
			errs = append(errs, fmt.Errorf("SWITCHBOARD_TRUSTED_PROXIES: %v", err))
		}
	}
	if c.BcryptCost < 4 || c.BcryptCost > 31 {
		errs = append(errs, fmt.Errorf("SWITCHBOARD_BCRYPT_COST: %d is outside 4-31", c.BcryptCost))
	}
	errs = append(errs, c.validateAccounts()...)
	if c.ReadBytes != 0 && c.ReadBytes < 64<<10 {
		errs = append(errs, fmt.Errorf("SWITCHBOARD_READ_BYTES: %d is below 65536", c.ReadBytes))
	}
	if c.StreamMaxEvents < 0 || c.StreamMaxAge < 0 {
		errs = append(errs, errors.New("SWITCHBOARD_STREAM_MAX_EVENTS and SWITCHBOARD_STREAM_MAX_AGE must not be negative"))
	}
	if c.RunOutputMax != 0 && (c.RunOutputMax < 1<<10 || c.RunOutputMax > 1<<20) {
		errs = append(errs, fmt.Errorf("SWITCHBOARD_RUN_OUTPUT_MAX_BYTES: %d is outside 1024-1048576", c.RunOutputMax))
	}
	if c.RunWorkers < 0 || c.RunWorkers > 10000 {
		errs = append(errs, fmt.Errorf("SWITCHBOARD_RUN_WORKERS: %d is outside 1-10000", c.RunWorkers))
	}
	if c.ClaimLead < 0 || c.ClaimLead > 5*time.Second {
		errs = append(errs, fmt.Errorf("SWITCHBOARD_CLAIM_LEAD: %s is outside 0-5s", c.ClaimLead))
	}
	if c.ClaimIdlePoll != 0 && (c.ClaimIdlePoll < time.Second || c.ClaimIdlePoll > time.Hour) {
		errs = append(errs, fmt.Errorf("SWITCHBOARD_CLAIM_IDLE_POLL: %s is outside 1s-1h", c.ClaimIdlePoll))
	}
	if c.RiverParkAfter != 0 && (c.RiverParkAfter < time.Second || c.RiverParkAfter > time.Hour) {
		errs = append(errs, fmt.Errorf("SWITCHBOARD_RIVER_PARK_AFTER: %s is outside 1s-1h (0: never park)", c.RiverParkAfter))
	}
	if c.RunRetention != 0 && c.RunRetention < time.Hour {
		errs = append(errs, fmt.Errorf("SWITCHBOARD_RUN_RETENTION: %s is shorter than 1h", c.RunRetention))
	}
	for _, o := range c.AllowedOrigins {
		if err := validateOrigin(o); err != nil {
			errs = append(errs, fmt.Errorf("SWITCHBOARD_ALLOWED_ORIGINS: %v", err))
		}
	}
	errs = append(errs, c.WSLimits.validate()...)
	errs = append(errs, c.Quotas.validate()...)
	errs = append(errs, c.Tracing.validate()...)
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("SWITCHBOARD_SHUTDOWN_TIMEOUT must be positive"))
	}
	return errors.Join(errs...)
}

// ValidateDatabase checks what every command needs: the database and the
// log settings.
func (c *Config) ValidateDatabase() error {
	var errs []error
	if c.DatabaseURL != "" {
		if err := validateDatabaseURL("DATABASE_URL", c.DatabaseURL); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.validatePooling()...)
	switch c.LogFormat {
	case "", "json", "text":
	default:
		errs = append(errs, fmt.Errorf("SWITCHBOARD_LOG_FORMAT: %q is not json or text", c.LogFormat))
	}
	switch strings.ToLower(c.LogLevel) {
	case "", "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("SWITCHBOARD_LOG_LEVEL: %q is not debug, info, warn or error", c.LogLevel))
	}
	return errors.Join(errs...)
}

func (c *Config) validatePooling() []error {
	var errs []error
	c.DatabasePooling = strings.ToLower(strings.TrimSpace(c.DatabasePooling))
	switch c.DatabasePooling {
	case "":
		c.DatabasePooling = PoolingSession
	case PoolingSession, PoolingTransaction:
	default:
		errs = append(errs, fmt.Errorf("SWITCHBOARD_DATABASE_POOLING: %q is not session or transaction", c.DatabasePooling))
	}
	if c.ListenURL == "" {
		return errs
	}
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("SWITCHBOARD_LISTEN_DATABASE_URL needs DATABASE_URL (the embedded PostgreSQL is always direct)"))
	}
	if err := validateDatabaseURL("SWITCHBOARD_LISTEN_DATABASE_URL", c.ListenURL); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// validateAccounts checks the settings of registration, password hashing
// and reset links.
func (c *Config) validateAccounts() []error {
	var errs []error
	c.Registration = strings.ToLower(strings.TrimSpace(c.Registration))
	switch c.Registration {
	case "":
		c.Registration = "open"
	case "open", "invite", "closed":
	default:
		errs = append(errs, fmt.Errorf("SWITCHBOARD_REGISTRATION: %q is not open, invite or closed", c.Registration))
	}
	if c.HashConcurrency < 0 {
		errs = append(errs, errors.New("SWITCHBOARD_PASSWORD_HASH_CONCURRENCY must not be negative (0: the number of CPUs)"))
	}
	if c.PublicURL != "" {
		if err := validateOrigin(c.PublicURL); err != nil || c.PublicURL == "*" {
			errs = append(errs, fmt.Errorf("SWITCHBOARD_PUBLIC_URL: %q is not scheme://host[:port] (https://switchboard.example.com)", c.PublicURL))
		}
	}
	if c.SMTPURL != "" {
		if _, err := mail.Parse(c.SMTPURL); err != nil {
			errs = append(errs, fmt.Errorf("SWITCHBOARD_SMTP_URL: %v", err))
		}
	}
	return errs
}

func (w WSLimits) validate() []error {
	var errs []error
	for name, v := range map[string]float64{
		"SWITCHBOARD_WS_CONN_RATE": w.ConnFrameRate, "SWITCHBOARD_WS_USER_RATE": w.UserFrameRate,
		"SWITCHBOARD_WS_CONN_BURST": float64(w.ConnFrameBurst), "SWITCHBOARD_WS_USER_BURST": float64(w.UserFrameBurst),
		"SWITCHBOARD_WS_USER_BYTES_RATE": float64(w.UserByteRate), "SWITCHBOARD_WS_LIMIT_STRIKES": float64(w.Strikes),
		"SWITCHBOARD_WS_MAX_CONNS_PER_USER": float64(w.MaxConnsPerUser), "SWITCHBOARD_WS_SEND_QUEUE_BYTES": float64(w.SendQueueBytes),
		"SWITCHBOARD_WS_WRITE_WAIT": float64(w.WriteWait),
	} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", name))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

func validateDatabaseURL(name, s string) error {
	u, err := url.Parse(s)
	if err != nil {
		// Not err itself: url.Error quotes the whole URL, password included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s is malformed: %v", name, err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("%s must start with postgres:// or postgresql://, got scheme %q", name, u.Scheme)
	}
	if u.Host == "" && u.Query().Get("host") == "" {
		return fmt.Errorf("%s has no host", name)
	}
	return nil
}

// validateOrigin accepts "*" or scheme://host[:port] with nothing after.
func validateOrigin(o string) error {
	o = strings.TrimSpace(o)
	if o == "*" {
		return nil
	}
	u, err := url.Parse(strings.TrimRight(o, "/"))
	if err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" || u.RawQuery != "" {
		return fmt.Errorf("%q is not an origin like https://app.example.com (or *)", o)
	}
	return nil
}

// ResetLinkBase is SWITCHBOARD_PUBLIC_URL, else http://localhost and the
// listen port: where the links of password reset mail point.
func (c Config) ResetLinkBase() string {
	if c.PublicURL != "" {
		return strings.TrimRight(c.PublicURL, "/")
	}
	_, port, _ := net.SplitHostPort(c.ListenAddr())
	return "http://localhost:" + port
}

// RedactURL is a database URL fit for logs: the password, in the userinfo
// or a password parameter, replaced by xxxxx.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// ParseCIDROrIP accepts "10.0.0.0/8" or a bare address.
func ParseCIDROrIP(s string) (*net.IPNet, error) {
	s = strings.TrimSpace(s)
	if _, n, err := net.ParseCIDR(s); err == nil {
		return n, nil
	}
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, fmt.Errorf("%q is neither a CIDR nor an IP address", s)
	}
	bits := 128
	if ip.To4() != nil {
		ip, bits = ip.To4(), 32
	}
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}, nil
}

// Hostname names this process in logs and cluster listings.
func Hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "switchboard"
	}
	return h
}
