package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/metrics"
	"github.com/switchboard/switchboard/infra/pgembed"
	"github.com/switchboard/switchboard/infra/tracing"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/migrations"
	"github.com/switchboard/switchboard/realtime"
	"github.com/switchboard/switchboard/web"
	"github.com/switchboard/switchboard/workers"
)

// app is one replica: every component built by newApp, started in the
// order of its service list and stopped in reverse.
type app struct {
	cfg      config.Config
	logger   *slog.Logger
	nodeID   string
	embedded *pgembed.Server
	tracing  *tracing.Tracing
	pool     *pgxpool.Pool
	registry *prometheus.Registry
	cluster  *cluster.Cluster
	web      *web.Server
	rt       *realtime.Realtime // with a hub and presence on web replicas
	bus      *realtime.Bus      // rt.Bus, which the job code announces through
	jobs     scheduling
	http     *http.Server
	listener net.Listener
	serveErr chan error
	services services

	// listenPool is the session connections River's notifier LISTENs on
	// (SWITCHBOARD_LISTEN_DATABASE_URL); nil: the pool's.
	listenPool *pgxpool.Pool
	// jobNotices are the job queue's notices the bus hears for it (worker
	// replicas; nil on web-only ones).
	jobNotices *workers.Notices
}

// run serves until ctx is cancelled, then shuts down gracefully.
func run(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	a, err := newApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		a.closeDatabase()
		return err
	}
	a.logBanner(os.Stderr)
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	case err = <-a.serveErr:
	}
	a.Stop()
	return err
}

func migrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	return withDatabase(ctx, cfg, logger, func(*pgxpool.Pool) error {
		logger.Info("database schema is current")
		return nil
	})
}

// withDatabase opens (or starts, or attaches to) the database, migrates it
// and runs fn on it: the commands that need only the database.
func withDatabase(ctx context.Context, cfg config.Config, logger *slog.Logger, fn func(*pgxpool.Pool) error) error {
	pool, embedded, err := openDatabase(ctx, &cfg, logger)
	if err != nil {
		return err
	}
	defer stopEmbedded(embedded)
	defer pool.Close()
	if err := migrations.Migrate(ctx, pool, logger); err != nil {
		return err
	}
	return fn(pool)
}

// newApp connects to (or starts) the database, migrates, and builds every
// component without starting any. Each build step takes what earlier ones
// made; the service list says in which order they run.
func newApp(ctx context.Context, cfg config.Config, logger *slog.Logger) (*app, error) {
	return newAppWith(ctx, cfg, logger, appOptions{})
}

func newAppWith(ctx context.Context, cfg config.Config, logger *slog.Logger, opts appOptions) (*app, error) {
	a := &app{cfg: cfg, nodeID: uuid.NewString(), registry: metrics.NewRegistry(), serveErr: make(chan error, 1)}
	a.registry.MustRegister(metrics.BuildInfo(version, revision))
	a.logger = logger.With("node_id", a.nodeID[:8])
	var err error
	a.pool, a.embedded, err = openDatabase(ctx, &a.cfg, a.logger)
	if err != nil {
		return nil, err
	}
	if err := migrations.Migrate(ctx, a.pool, a.logger); err != nil {
		a.closeDatabase()
		return nil, err
	}
	if err := a.newTracing(ctx, opts); err != nil {
		a.closeDatabase()
		return nil, err
	}
	if a.listenPool, err = openListenPool(ctx, a.cfg); err != nil {
		a.stopTracing(ctx)
		a.closeDatabase()
		return nil, err
	}
	if a.cfg.PollOnly() {
		a.logger.Warn("transaction pooling without SWITCHBOARD_LISTEN_DATABASE_URL: poll-only; events reach other replicas " +
			"up to a second late, River notices new jobs on its fetch poll (docs/deploy.md)")
	}
	if a.jobNotices, err = a.newNotices(ctx); err != nil {
		a.stopTracing(ctx)
		a.closeDatabase()
		return nil, err
	}
	if err := a.build(); err != nil {
		a.stopTracing(ctx)
		a.closeDatabase()
		return nil, err
	}
	return a, nil
}

func (a *app) build() error {
	a.rt = a.newRealtime()
	a.bus = a.rt.Bus
	metrics := jobs.NewMetrics(a.registry)
	announcer := jobs.NewAnnouncer(jobs.AnnouncerOptions{Publisher: a.bus, Metrics: metrics, Logger: a.logger})
	a.cluster = a.newCluster(announcer)
	var err error
	if a.jobs, err = a.newScheduling(metrics, announcer); err != nil {
		return err
	}
	a.registerParkMetrics()
	wopts := web.Options{
		Pool: a.pool, Logger: a.logger, Registry: a.registry, Version: version,
		PublicAPI: a.cfg.HasRole(config.RoleWeb),
		JWTSecret: []byte(a.cfg.JWTSecret), BcryptCost: a.cfg.BcryptCost, BodyReadTimeout: a.cfg.BodyReadTimeout,
		RateLimits: a.rateLimits(), Quotas: a.cfg.Quotas.Limits(), AllowedOrigins: a.cfg.AllowedOrigins,
		Cluster: a.cluster, TracerProvider: a.tracing.TracerProvider(),
	}
	if err := a.accountsWebOptions(&wopts); err != nil {
		return err
	}
	a.realtimeWebOptions(&wopts)
	a.jobsWebOptions(&wopts)
	a.web = web.New(wopts)
	a.services = services{list: a.serviceList()}
	return nil
}

// serviceList is every long-running part in start order; Stop runs it
// backwards: drain first (readiness fails, no new ticks, jobs or sockets),
// then the maintenance loop, the job queue (the claim loop, then River:
// running jobs finish while requests are still served, so heartbeats go
// on and nobody takes them for dead), the sockets, HTTP, the River UI, the
// bus (what it still holds is sent), cluster membership, the listener, and
// last tracing (the spans left).
func (a *app) serviceList() []service {
	list := []service{
		onStop("tracing", a.stopTracing),
		{name: "listener", start: a.listen, stop: a.closeListener},
		component("cluster", a.cluster),
		startWithin(15*time.Second, component("realtime bus", a.rt.Bus)),
	}
	if a.rt.Presence != nil { // stops after the sockets closed: it ends what they held
		list = append(list, component("presence", a.rt.Presence))
	}
	list = append(list, a.jobs.webServices()...)
	list = append(list, service{name: "http", start: a.serve, stop: a.shutdownHTTP})
	if a.rt.Hub != nil {
		list = append(list, onStop("sockets", a.rt.Hub.Shutdown))
	}
	list = append(list, a.jobs.queueServices()...)
	return append(list, onStop("drain", a.cluster.DrainLocal))
}

// registerParkMetrics exports whether River is parked, and how often it
// parked.
func (a *app) registerParkMetrics() {
	river := a.jobs.queue.River()
	a.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_river_parked",
			Help: "1 while this worker replica's River client is parked: nothing due (SWITCHBOARD_RIVER_PARK_AFTER)."},
			func() float64 {
				if river.Parked() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "switchboard_river_parks_total",
			Help: "Times this replica's River client parked."},
			func() float64 { return float64(river.Parks()) }),
	)
}

// parkAfter is how long an idle worker replica's River client runs before
// it parks (SWITCHBOARD_RIVER_PARK_AFTER); 0 when it never parks: a
// poll-only replica could not hear the work that wakes it.
func (a *app) parkAfter() time.Duration {
	if a.cfg.PollOnly() || !a.cfg.HasRole(config.RoleWorker) {
		return 0
	}
	return a.cfg.RiverParkAfter
}

// Start runs the service list; it returns once everything runs. On a
// failure what started is stopped again.
func (a *app) Start(ctx context.Context) error {
	return a.services.startAll(ctx, a.cfg.ShutdownTimeout)
}

// Addr is the address the HTTP server listens on.
func (a *app) Addr() string { return a.listener.Addr().String() }

// Stop stops the services in reverse order within the shutdown budget,
// then closes the pool and stops embedded Postgres.
func (a *app) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	a.services.stopAll(ctx)
	a.closeDatabase()
}

func (a *app) listen(context.Context) error {
	l, err := net.Listen("tcp", a.cfg.ListenAddr())
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.cfg.ListenAddr(), err)
	}
	a.listener = l
	return nil
}

// closeListener closes the listener (HTTP's shutdown closed it already
// when it served).
func (a *app) closeListener(context.Context) { _ = a.listener.Close() }

func (a *app) serve(context.Context) error {
	a.http = web.NewHTTPServer(a.web, web.HTTPServerOptions{Logger: a.logger})
	go func() {
		if err := a.http.Serve(a.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.serveErr <- fmt.Errorf("http: %w", err)
		}
	}()
	return nil
}

// shutdownHTTP stops accepting and finishes in-flight requests by ctx's
// deadline; then it cuts what is left, and waits for the mail requests
// started.
func (a *app) shutdownHTTP(ctx context.Context) {
	if err := a.http.Shutdown(ctx); err != nil {
		a.logger.Warn("http shutdown incomplete", "error", err)
		_ = a.http.Close()
	}
	a.web.Close()
}

func (a *app) closeDatabase() {
	if a.listenPool != nil {
		a.listenPool.Close()
	}
	if a.pool != nil {
		a.pool.Close()
	}
	stopEmbedded(a.embedded)
}

func stopEmbedded(s *pgembed.Server) {
	if s != nil {
		_ = s.Stop()
	}
}

// openDatabase connects to DATABASE_URL, or starts the embedded server and
// fills in the secrets kept in the data directory.
func openDatabase(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*pgxpool.Pool, *pgembed.Server, error) {
	var embedded *pgembed.Server
	url := cfg.DatabaseURL
	if cfg.Embedded() {
		var err error
		embedded, err = pgembed.Start(ctx, pgembed.Options{Dir: cfg.DataDir, Logger: logger})
		if err != nil {
			return nil, nil, fmt.Errorf("embedded postgres: %w", err)
		}
		url = embedded.URL()
		if err := embeddedSecrets(cfg); err != nil {
			stopEmbedded(embedded)
			return nil, nil, err
		}
	}
	pool, err := db.Connect(ctx, url, db.Options{TransactionPooled: cfg.TransactionPooled()})
	if err != nil {
		stopEmbedded(embedded)
		return nil, nil, err
	}
	return pool, embedded, nil
}

// openListenPool connects to SWITCHBOARD_LISTEN_DATABASE_URL, when set:
// the session connections the bus and River LISTEN on while queries go
// through a transaction-mode pooler. Nil when unset.
func openListenPool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	if cfg.ListenURL == "" {
		return nil, nil
	}
	// River's notifier hijacks one connection; nothing else queries here.
	pool, err := db.Connect(ctx, cfg.ListenURL, db.Options{MaxConns: 2})
	if err != nil {
		return nil, fmt.Errorf("SWITCHBOARD_LISTEN_DATABASE_URL: %w", err)
	}
	return pool, nil
}

// embeddedSecrets generates the JWT and cluster secrets once and keeps them
// in the data directory, so tokens survive restarts and a second replica on
// the same directory shares them.
func embeddedSecrets(cfg *config.Config) error {
	for _, s := range []struct {
		v    *string
		file string
	}{{&cfg.JWTSecret, "jwt.secret"}, {&cfg.ClusterSecret, "cluster.secret"}} {
		if *s.v != "" {
			continue
		}
		v, err := pgembed.Secret(cfg.DataDir, s.file)
		if err != nil {
			return fmt.Errorf("embedded secrets: %w", err)
		}
		*s.v = v
	}
	return nil
}

// sharedEnv is the SWITCHBOARD_* settings of this process that a second
// replica must share (limits, origins, ...), as shell assignments.
// Per-node settings are left out; secrets come from the data directory.
func sharedEnv() string {
	var b strings.Builder
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case !strings.HasPrefix(k, "SWITCHBOARD_"),
			k == "SWITCHBOARD_DATA_DIR", k == "SWITCHBOARD_HTTP_ADDR", k == "SWITCHBOARD_ADVERTISE_ADDR",
			k == "SWITCHBOARD_JWT_SECRET", k == "SWITCHBOARD_CLUSTER_SECRET":
			continue
		}
		fmt.Fprintf(&b, "%s='%s' ", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	return b.String()
}

// selfCommand is how the user started us: `go run ./cmd/switchboard` when
// the binary lives in go run's build cache.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil || strings.Contains(exe, "go-build") {
		return "go run ./cmd/switchboard"
	}
	return exe
}
