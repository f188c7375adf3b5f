package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/metrics"
	"github.com/switchboard/switchboard/infra/pgembed"
	"github.com/switchboard/switchboard/migrations"
	"github.com/switchboard/switchboard/realtime"
	"github.com/switchboard/switchboard/web"
	"github.com/switchboard/switchboard/workers"
)

// app is one replica: every component wired, started and stopped in order.
type app struct {
	cfg      config.Config
	logger   *slog.Logger
	nodeID   string
	embedded *pgembed.Server
	pool     *pgxpool.Pool
	registry *prometheus.Registry
	river    *river.Client[pgx.Tx]
	cluster  *cluster.Cluster
	drain    riverDrain
	web      *web.Server
	hub      *realtime.Hub // web replicas only
	bus      *realtime.Bus
	jobs     jobsParts
	http     *http.Server
	listener net.Listener
	serveErr chan error
	// maintenance tasks the components add, run by River on worker replicas.
	maintenance []workers.MaintenanceTask

	clusterStarted bool
}

// run serves until ctx is cancelled, then shuts down gracefully.
func run(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	a, err := newApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		a.Stop()
		return err
	}
	a.logBanner()
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	case err = <-a.serveErr:
	}
	a.Stop()
	return err
}

func migrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	pool, embedded, err := openDatabase(ctx, &cfg, logger)
	if err != nil {
		return err
	}
	defer stopEmbedded(embedded)
	defer pool.Close()
	if err := migrations.Migrate(ctx, pool, logger); err != nil {
		return err
	}
	logger.Info("migrations applied")
	return nil
}

// newApp connects to (or starts) the database, migrates, and builds every
// component without starting any.
func newApp(ctx context.Context, cfg config.Config, logger *slog.Logger) (*app, error) {
	a := &app{cfg: cfg, nodeID: uuid.NewString(), registry: metrics.NewRegistry(), serveErr: make(chan error, 1)}
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
	a.buildRealtime()
	a.buildJobs()
	a.buildCluster()
	if err := a.buildRiver(); err != nil {
		a.closeDatabase()
		return nil, err
	}
	if err := a.buildScheduling(); err != nil {
		a.closeDatabase()
		return nil, err
	}
	wopts := web.Options{
		Pool: a.pool, Logger: a.logger, Registry: a.registry, Version: version,
		PublicAPI: a.cfg.HasRole(config.RoleWeb),
		JWTSecret: []byte(a.cfg.JWTSecret), BcryptCost: a.cfg.BcryptCost,
		RateLimits: a.rateLimits(),
		Cluster:    a.cluster, Presence: a.cluster,
	}
	a.realtimeWebOptions(&wopts)
	a.jobsWebOptions(&wopts)
	a.web = web.New(wopts)
	a.wireCluster()
	return a, nil
}

// buildRiver makes a working client on worker replicas and an insert-only
// one on web-only replicas.
func (a *app) buildRiver() error {
	rcfg := &river.Config{ID: a.nodeID, Logger: a.logger.With("component", "river")}
	if a.cfg.HasRole(config.RoleWorker) {
		var err error
		wopts := a.workerOptions()
		wopts.Maintenance = append(a.maintenance, a.rateLimitPrune())
		rcfg, err = workers.RiverConfig(wopts)
		if err != nil {
			return err
		}
	}
	client, err := river.NewClient(riverpgxv5.New(a.pool), rcfg)
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	a.river = client
	return nil
}

// Start listens and starts River; it returns once both run.
func (a *app) Start(ctx context.Context) error {
	l, err := net.Listen("tcp", a.cfg.ListenAddr())
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.cfg.ListenAddr(), err)
	}
	a.listener = l
	if err := a.cluster.Start(ctx); err != nil {
		return fmt.Errorf("join the cluster: %w", err)
	}
	a.clusterStarted = true
	if err := a.startRealtime(ctx); err != nil {
		return err
	}
	if a.cfg.HasRole(config.RoleWorker) {
		// River's own context: jobs must not die with the signal context.
		if err := a.river.Start(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("start river: %w", err)
		}
	}
	if err := a.startScheduling(ctx); err != nil {
		return err
	}
	a.http = &http.Server{Handler: a.web, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn)}
	go func() {
		if err := a.http.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.serveErr <- fmt.Errorf("http: %w", err)
		}
	}()
	return nil
}

// Addr is the address the HTTP server listens on.
func (a *app) Addr() string { return a.listener.Addr().String() }

// Stop shuts down in order: drain (readiness fails, the claim loop pauses,
// sockets are told server.draining and new ones refused), stop the claim
// loop, let River finish
// running jobs (cancel them at the deadline) while requests are still
// served, close the sockets, stop accepting and finish in-flight requests,
// flush the bus, deregister from the cluster, close the pool, stop embedded
// Postgres. Heartbeats go on until
// River is done, so no other node takes this one's running jobs for dead.
func (a *app) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	a.endDrainStop()
	if a.clusterStarted {
		a.cluster.DrainLocal(ctx)
	}
	a.stopScheduling()
	a.stopRiver(ctx)
	a.drainRealtime(ctx)
	if a.http != nil {
		if err := a.http.Shutdown(ctx); err != nil {
			a.logger.Warn("http shutdown incomplete", "error", err)
			_ = a.http.Close()
		}
	} else if a.listener != nil {
		_ = a.listener.Close()
	}
	a.stopRealtime()
	if a.clusterStarted {
		a.cluster.Stop()
	}
	a.closeDatabase()
}

func (a *app) stopRiver(ctx context.Context) {
	if a.river == nil || !a.cfg.HasRole(config.RoleWorker) {
		return
	}
	if err := a.river.Stop(ctx); err != nil {
		a.logger.Warn("river did not finish running jobs in time; cancelling them", "error", err)
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = a.river.StopAndCancel(cctx)
		ccancel()
	}
}

func (a *app) closeDatabase() {
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
	pool, err := db.Connect(ctx, url, db.Options{})
	if err != nil {
		stopEmbedded(embedded)
		return nil, nil, err
	}
	return pool, embedded, nil
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

// logBanner tells a person where everything is and how to add a replica.
func (a *app) logBanner() {
	port := a.listener.Addr().(*net.TCPAddr).Port
	base := "http://localhost:" + strconv.Itoa(port)
	attrs := []any{"api", base + "/v1", "docs", base + "/docs", "roles", strings.Join(a.cfg.Roles, ",")}
	if a.cfg.HasRole(config.RoleWeb) {
		attrs = append([]any{"console", base + "/console"}, attrs...)
	}
	if a.embedded != nil {
		dir, _ := filepath.Abs(a.cfg.DataDir)
		// The password stays in the data directory, out of the logs.
		attrs = append(attrs, "database_url", config.RedactURL(a.embedded.URL()),
			"database_password_file", filepath.Join(dir, "postgres.password"),
			"second_replica", fmt.Sprintf("%sSWITCHBOARD_DATA_DIR=%s PORT=%d %s", sharedEnv(), dir, port+1, selfCommand()))
	}
	a.logger.Info("switchboard is serving", attrs...)
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
