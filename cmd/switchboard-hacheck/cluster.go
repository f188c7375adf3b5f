package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/cmd/internal/replica"
	"github.com/switchboard/switchboard/infra/freeport"
	"github.com/switchboard/switchboard/infra/pgembed"
	"github.com/switchboard/switchboard/infra/testkit/cutproxy"
	"github.com/switchboard/switchboard/infra/testkit/pgbouncer"
)

const replicaCount = 3

// adminEmail gets the admin role through `switchboard admin grant`.
const adminEmail = "admin@hacheck.test"

// cluster is PostgreSQL plus the replicas, all processes this program owns.
type cluster struct {
	dir      string
	bin      string
	dbURL    string
	pg       *pgembed.Server // nil when DATABASE_URL came from the environment
	pgOpts   pgembed.Options
	pgURL    string // the server's own URL (dbURL may be PgBouncer's)
	pgLog    string
	replicas []*replica.Process
	// bouncer is the PgBouncer the replicas go through (-pgbouncer): the
	// database in transaction mode (dbURL), LISTEN in session mode
	// (listenURL), both at one address however the server behind moves.
	bouncer   *pgbouncer.Bouncer
	listenURL string
	// proxies[i] stands between replica i and PostgreSQL (-soak), so one
	// replica's connections can be cut; replica i's pool connections are
	// named soakAppName(i).
	proxies []*cutproxy.Proxy
}

// clusterOptions say what stands between the replicas and PostgreSQL.
type clusterOptions struct {
	// bouncer: a real PgBouncer in transaction mode (-pgbouncer).
	bouncer bool
	// proxies: a cut proxy per replica (-soak).
	proxies bool
}

// dbEnv is how every switchboard process reaches the database.
func (c *cluster) dbEnv() []string {
	env := []string{"DATABASE_URL=" + c.dbURL}
	if c.bouncer != nil {
		env = append(env, "SWITCHBOARD_DATABASE_POOLING=transaction", "SWITCHBOARD_LISTEN_DATABASE_URL="+c.listenURL)
	}
	return env
}

// startCluster builds the binary, starts PostgreSQL and the replicas, and
// waits until every replica is ready.
func startCluster(ctx context.Context, dir string, opts clusterOptions, progress func(string, ...any)) (*cluster, error) {
	c := &cluster{dir: dir, bin: filepath.Join(dir, "switchboard")}
	progress("building %s", c.bin)
	if err := replica.Build(ctx, replica.BuildOptions{Output: c.bin}); err != nil {
		return c, err
	}
	if err := c.startPostgres(ctx, progress); err != nil {
		return c, err
	}
	if opts.bouncer {
		if err := c.startBouncer(ctx, progress); err != nil {
			return c, err
		}
	}
	secret := func() string { b := make([]byte, 24); _, _ = rand.Read(b); return hex.EncodeToString(b) }
	shared := []string{
		"SWITCHBOARD_JWT_SECRET=" + secret(),
		"SWITCHBOARD_CLUSTER_SECRET=" + secret(),
		"SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=true",
		"SWITCHBOARD_LOG_FORMAT=json",
		"SWITCHBOARD_BCRYPT_COST=4",
		"SWITCHBOARD_SHUTDOWN_TIMEOUT=15s",
	}
	for i := range replicaCount {
		name := fmt.Sprintf("r%d", i+1)
		addr, err := freeport.Addr()
		if err != nil {
			return c, err
		}
		dbEnv, err := c.replicaDBEnv(i, opts.proxies)
		if err != nil {
			return c, err
		}
		env := append(append(dbEnv, shared...), "SWITCHBOARD_ADVERTISE_ADDR="+addr, "SWITCHBOARD_DATA_DIR="+filepath.Join(dir, "data-"+name))
		r, err := replica.New(replica.Options{
			Bin: c.bin, Name: name, Addr: addr, Env: env,
			LogPath: filepath.Join(dir, fmt.Sprintf("replica-%d.log", i+1)),
		})
		if err != nil {
			return c, err
		}
		c.replicas = append(c.replicas, r)
	}
	// All three at once: migrations must serialise on their advisory lock.
	for _, r := range c.replicas {
		if err := r.Start(); err != nil {
			return c, err
		}
	}
	progress("started %d replicas, waiting for readiness", replicaCount)
	for _, r := range c.replicas {
		if err := r.WaitReady(ctx, 60*time.Second); err != nil {
			return c, err
		}
	}
	return c, nil
}

// replicaDBEnv is how replica i reaches the database: as every process
// does (dbEnv), or through a cut proxy of its own with its pool
// connections named soakAppName(i).
func (c *cluster) replicaDBEnv(i int, proxied bool) ([]string, error) {
	if !proxied {
		return c.dbEnv(), nil
	}
	if c.bouncer != nil {
		return nil, errors.New("cut proxies stand in front of PostgreSQL itself, not PgBouncer")
	}
	p, err := cutproxy.Start(c.dbURL)
	if err != nil {
		return nil, err
	}
	c.proxies = append(c.proxies, p)
	u, err := url.Parse(c.dbURL)
	if err != nil {
		return nil, err
	}
	u.Host = p.Addr()
	q := u.Query()
	q.Set("application_name", soakAppName(i))
	u.RawQuery = q.Encode()
	return []string{"DATABASE_URL=" + u.String()}, nil
}

// startPostgres uses DATABASE_URL when set; otherwise starts a private
// server on a fixed port, so a restart keeps the URL the replicas hold.
func (c *cluster) startPostgres(ctx context.Context, progress func(string, ...any)) error {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		c.dbURL = u
		progress("using DATABASE_URL from the environment (the postgres restart check is skipped)")
		return nil
	}
	port, err := freeport.Port()
	if err != nil {
		return err
	}
	c.pgOpts = pgembed.Options{Dir: filepath.Join(c.dir, "pg"), Ephemeral: true, Port: port, MaxConnections: 300}
	c.pgLog = filepath.Join(c.pgOpts.Dir, "postgres.log")
	progress("starting postgres on 127.0.0.1:%d", port)
	if c.pg, err = pgembed.Start(ctx, c.pgOpts); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	c.dbURL, c.pgURL = c.pg.URL(), c.pg.URL()
	return nil
}

// startBouncer puts a real PgBouncer in front of our PostgreSQL: the
// replicas' pools and River in transaction mode, their LISTEN connections
// on a session-mode alias of the same database.
func (c *cluster) startBouncer(ctx context.Context, progress func(string, ...any)) error {
	if c.pg == nil {
		return errors.New("-pgbouncer needs the PostgreSQL this program starts (unset DATABASE_URL)")
	}
	u, err := url.Parse(c.dbURL)
	if err != nil {
		return err
	}
	pw, _ := u.User.Password()
	db := strings.TrimPrefix(u.Path, "/")
	opts := pgbouncer.Options{
		Dir: filepath.Join(c.dir, "pgbouncer"), Server: u.Host, User: u.User.Username(), Password: pw,
		// Server connections for all three replicas' busy moments (a 1000
		// tick backfill runs 100 jobs per replica at once): PgBouncer's 20
		// would queue them behind each other, and requests time out.
		PoolSize: 60,
		Aliases:  []pgbouncer.Alias{{Name: db, DBName: db}, {Name: db + "_listen", DBName: db, PoolMode: "session"}},
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return err
	}
	if c.bouncer, err = pgbouncer.Start(ctx, opts, db); err != nil {
		return fmt.Errorf("start pgbouncer: %w", err)
	}
	c.dbURL, c.listenURL = c.bouncer.URL(db), c.bouncer.URL(db+"_listen")
	progress("pgbouncer on %s in front of postgres %s (transaction mode; LISTEN on a session-mode alias)", c.bouncer.Addr(), u.Host)
	return nil
}

// stopPostgres is a fast shutdown, like a database failover or restart.
func (c *cluster) stopPostgres() error {
	if c.pg == nil {
		return errors.New("postgres is not ours")
	}
	return c.pg.Stop()
}

// restartPostgres starts it again on the same directory and port.
func (c *cluster) restartPostgres(ctx context.Context) error {
	s, err := pgembed.Start(ctx, c.pgOpts)
	if err != nil {
		return err
	}
	c.pg = s
	if s.URL() != c.pgURL {
		return fmt.Errorf("postgres came back at %s, not %s", s.URL(), c.pgURL)
	}
	return nil
}

// stop ends every replica (SIGTERM, then SIGKILL) and PostgreSQL.
func (c *cluster) stop() {
	var wg sync.WaitGroup
	for _, r := range c.replicas {
		wg.Go(func() { _, _, _ = r.Terminate(5 * time.Second) })
	}
	wg.Wait()
	for _, p := range c.proxies {
		p.Close()
	}
	if c.bouncer != nil {
		c.bouncer.Stop()
	}
	if c.pg != nil {
		_ = c.pg.Stop()
	}
}

// grantAdmin runs `switchboard admin grant email` against the cluster's
// database, as an operator would.
func (c *cluster) grantAdmin(ctx context.Context, email string) error {
	cmd := exec.CommandContext(ctx, c.bin, "admin", "grant", email)
	cmd.Env = append(append(replica.BaseEnv(), c.dbEnv()...), "SWITCHBOARD_LOG_LEVEL=warn")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("switchboard admin grant %s: %w\n%s", email, err, out)
	}
	return nil
}
