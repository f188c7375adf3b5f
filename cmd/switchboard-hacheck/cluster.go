package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/switchboard/switchboard/cmd/internal/replica"
	"github.com/switchboard/switchboard/infra/freeport"
	"github.com/switchboard/switchboard/infra/pgembed"
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
	pgLog    string
	replicas []*replica.Process
}

// startCluster builds the binary, starts PostgreSQL and the replicas, and
// waits until every replica is ready.
func startCluster(ctx context.Context, dir string, progress func(string, ...any)) (*cluster, error) {
	c := &cluster{dir: dir, bin: filepath.Join(dir, "switchboard")}
	progress("building %s", c.bin)
	if err := replica.Build(ctx, replica.BuildOptions{Output: c.bin}); err != nil {
		return c, err
	}
	if err := c.startPostgres(ctx, progress); err != nil {
		return c, err
	}
	secret := func() string { b := make([]byte, 24); _, _ = rand.Read(b); return hex.EncodeToString(b) }
	shared := []string{
		"DATABASE_URL=" + c.dbURL,
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
		env := append(slices.Clone(shared), "SWITCHBOARD_ADVERTISE_ADDR="+addr, "SWITCHBOARD_DATA_DIR="+filepath.Join(dir, "data-"+name))
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
	c.dbURL = c.pg.URL()
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
	if s.URL() != c.dbURL {
		return fmt.Errorf("postgres came back at %s, not %s", s.URL(), c.dbURL)
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
	if c.pg != nil {
		_ = c.pg.Stop()
	}
}

// grantAdmin runs `switchboard admin grant email` against the cluster's
// database, as an operator would.
func (c *cluster) grantAdmin(ctx context.Context, email string) error {
	cmd := exec.CommandContext(ctx, c.bin, "admin", "grant", email)
	cmd.Env = append(replica.BaseEnv(), "DATABASE_URL="+c.dbURL, "SWITCHBOARD_LOG_LEVEL=warn")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("switchboard admin grant %s: %w\n%s", email, err, out)
	}
	return nil
}
