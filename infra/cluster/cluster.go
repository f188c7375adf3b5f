// Package cluster owns cluster membership and node-to-node calls. Every
// process (node) registers in cluster_nodes and heartbeats; any node answers
// for the whole cluster (status) by asking every registered node
// over HMAC-signed internal HTTP calls, and fans operator actions (disconnect
// a user, drain a node) out to them, reporting which nodes acked and which
// failed. A signed internal request is applied on its node only and never
// forwarded or fanned out again, so calls cannot loop.
//
// It owns membership (cluster_nodes) and the signed transport only. What
// lives in other packages' tables reaches it through hooks in Options:
// the job queue's owner rescues a dead node's jobs (RescueJobs) and reports
// the queue and scheduler backlog (Work); the hub answers for its sockets
// (Sockets) and actions register their local half (Actions).
package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/startstop"
)

// Defaults of Options.
const (
	DefaultHeartbeatEvery = 2 * time.Second
	DefaultExpireAfter    = 10 * time.Second
	DefaultReapAfter      = time.Minute
	// DefaultStatusBudget is how long status waits for each node.
	DefaultStatusBudget = 500 * time.Millisecond
	// ActionBudget is how long a fanned-out action waits for each node.
	ActionBudget = 2 * time.Second
)

// Sockets is what the cluster needs from this node's realtime hub.
type Sockets interface {
	// LocalConnections is the number of sockets open on this node.
	LocalConnections() int
	// DrainLocal tells every local socket server.draining and refuses new ones.
	DrainLocal()
}

// Options configure a node's membership; zero values mean the defaults.
type Options struct {
	DB       db.DB
	Logger   *slog.Logger
	Registry prometheus.Registerer
	// NodeID names this process; it is also its River client id.
	NodeID  string
	Name    string
	Roles   []string
	Version string
	// Addr is where the other nodes reach this one (host:port), read at Start.
	Addr func() string
	// Secret keys the HMAC of node-to-node calls.
	Secret []byte
	// Sockets is the local realtime hub; nil means no sockets.
	Sockets Sockets
	// Actions are the operator actions FanOut can apply on every node.
	Actions []Action
	// OnDrain run once, in order, when this node starts draining: pause the
	// claim loop, stop taking River jobs.
	OnDrain []func()
	// RescueJobs, if set, makes the running jobs of the given dead nodes
	// (silent for longer than ExpireAfter) available again and says how
	// many; the job queue's owner provides it. It runs after heartbeats,
	// once this node may rescue, and before Reap deletes nodes.
	RescueJobs func(ctx context.Context, deadNodes []string) (int, error)
	// Work, if set, reports the job queue and the scheduler backlog for
	// Status; their owners provide it. Nil reports zeros.
	Work func(ctx context.Context) (Work, error)
	// HeartbeatEvery is the beat period; ExpireAfter how long a silent node
	// keeps its running jobs; ReapAfter how long before its row is deleted.
	HeartbeatEvery time.Duration
	ExpireAfter    time.Duration
	ReapAfter      time.Duration
	// StatusBudget is how long Status waits for each node's answer before
	// it reports the node unreachable; default DefaultStatusBudget.
	StatusBudget time.Duration
	// Client makes the calls to other nodes; default: short timeouts.
	Client *http.Client
}

// Cluster is this node's membership and its view of the others.
type Cluster struct {
	opts      Options
	logger    *slog.Logger
	client    *http.Client
	startedAt time.Time
	addr      atomic.Value // string
	draining  atomic.Bool
	// healthySince is when this node's heartbeats last started succeeding
	// without a break (nil while they fail). A time.Time keeps its
	// monotonic reading, so a step of the wall clock does not move it.
	healthySince atomic.Pointer[time.Time]
	// seen is what the last successful heartbeat read of the other nodes
	// (nil before one, and while heartbeats fail): DeadNodes answers from
	// it without a statement.
	seen      atomic.Pointer[beatView]
	drainOnce sync.Once
	leaveOnce sync.Once
	metrics   *clusterMetrics
	actions   map[string]Action
	base      startstop.Base
}

// New builds the node's membership without starting it.
func New(opts Options) *Cluster {
	opts.HeartbeatEvery = cmp.Or(opts.HeartbeatEvery, DefaultHeartbeatEvery)
	opts.ExpireAfter = cmp.Or(opts.ExpireAfter, DefaultExpireAfter)
	opts.ReapAfter = cmp.Or(opts.ReapAfter, DefaultReapAfter)
	opts.StatusBudget = cmp.Or(opts.StatusBudget, DefaultStatusBudget)
	opts.Name = cmp.Or(opts.Name, opts.NodeID)
	opts.Version = cmp.Or(opts.Version, "dev")
	if opts.Roles == nil {
		opts.Roles = []string{} // the column is NOT NULL
	}
	if opts.Sockets == nil {
		opts.Sockets = noSockets{}
	}
	if opts.Addr == nil {
		opts.Addr = func() string { return "" }
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	c := &Cluster{
		opts: opts, logger: cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)).With("component", "cluster"),
		client: cmp.Or(opts.Client, NewHTTPClient()), startedAt: time.Now().UTC().Truncate(time.Microsecond),
		metrics: newClusterMetrics(opts.Registry), actions: map[string]Action{},
	}
	for _, a := range opts.Actions {
		c.actions[a.Name] = a
	}
	c.addr.Store("")
	return c
}

// NodeID is this node's id.
func (c *Cluster) NodeID() string { return c.opts.NodeID }

func (c *Cluster) self() Node {
	addr, _ := c.addr.Load().(string)
	return Node{ID: c.opts.NodeID, Name: c.opts.Name, Addr: addr, Roles: c.opts.Roles,
		Version: c.opts.Version, StartedAt: c.startedAt, Draining: c.draining.Load()}
}

// Start registers the node and starts heartbeating; it returns once the
// node is registered. A second Start is refused (startstop.ErrStarted).
func (c *Cluster) Start(ctx context.Context) error {
	runCtx, err := c.base.Begin(ctx)
	if err != nil {
		return fmt.Errorf("join the cluster: %w", err)
	}
	c.addr.Store(c.opts.Addr())
	if err := nodeUpsert(ctx, c.opts.DB, c.self()); err != nil {
		return fmt.Errorf("join the cluster: %w", err)
	}
	c.base.Go(func() { c.loop(runCtx) })
	return nil
}

// Stop stops heartbeating and deregisters the node (once, also after
// StopHeartbeat). Before Start it does nothing.
func (c *Cluster) Stop() {
	if !c.base.Started() {
		return
	}
	c.base.Stop()
	c.leaveOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := nodeDelete(ctx, c.opts.DB, c.opts.NodeID); err != nil {
			c.logger.Warn("could not deregister; the node will expire instead", "error", err)
		}
	})
}

// StopHeartbeat stops heartbeating but leaves the node registered, as a
// crashed process would: the other nodes see it expire. Tests of failure
// handling use it.
func (c *Cluster) StopHeartbeat() { c.base.Stop() }

func (c *Cluster) loop(ctx context.Context) {
	t := time.NewTicker(c.opts.HeartbeatEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := c.beat(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			c.logger.Warn("heartbeat failing; the node will expire if this lasts", "error", err, "expire_after", c.opts.ExpireAfter.String())
		case err == nil && failing:
			c.logger.Info("heartbeat recovered")
		}
		failing = err != nil
	}
}

// beat refreshes this node's row, then rescues the jobs of expired nodes.
// Refreshing and listing the expired nodes is one statement: an idle node's
// heartbeat is one round trip.
func (c *Cluster) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.HeartbeatEvery)
	defer cancel()
	rescue := c.opts.RescueJobs != nil && c.mayRescue()
	// why: the view's clock starts before the statement, so its times left
	// err short by the round trip (DeadNodes then asks the database a
	// little early), never long.
	sent := time.Now()
	others, err := nodeBeat(ctx, c.opts.DB, c.self(), c.opts.ExpireAfter)
	if err != nil {
		c.healthySince.Store(nil)
		c.seen.Store(nil)
		return fmt.Errorf("heartbeat: %w", err)
	}
	c.healthySince.CompareAndSwap(nil, new(time.Now()))
	c.seen.Store(&beatView{at: sent, others: others})
	if !rescue {
		return nil
	}
	if _, err := c.rescue(ctx, expired(others)); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// beatView is the other nodes as a heartbeat read them, and when.
type beatView struct {
	at     time.Time
	others []nodeLeft
}

// expired are the nodes whose time was up when the heartbeat read them.
func expired(others []nodeLeft) []string {
	var ids []string
	for _, o := range others {
		if o.left < 0 {
			ids = append(ids, o.id)
		}
	}
	return ids
}

// mayRescue is false until this node has heartbeated without a break for
// longer than ExpireAfter. After a database outage every node's heartbeat
// looks stale at once; the first node back must give the others time to
// beat again instead of taking the jobs they are still running.
func (c *Cluster) mayRescue() bool {
	since := c.healthySince.Load()
	return since != nil && time.Since(*since) > c.opts.ExpireAfter
}

// RescueDead hands the nodes silent for longer than ExpireAfter to
// Options.RescueJobs and returns how many jobs it rescued.
func (c *Cluster) RescueDead(ctx context.Context) (int, error) {
	if c.opts.RescueJobs == nil {
		return 0, nil
	}
	dead, err := nodesExpired(ctx, c.opts.DB, c.opts.ExpireAfter)
	if err != nil {
		return 0, fmt.Errorf("rescue the jobs of dead nodes: %w", err)
	}
	return c.rescue(ctx, dead)
}

// rescue hands dead nodes to Options.RescueJobs.
func (c *Cluster) rescue(ctx context.Context, dead []string) (int, error) {
	if len(dead) == 0 {
		return 0, nil
	}
	n, err := c.opts.RescueJobs(ctx, dead)
	if err != nil {
		return 0, fmt.Errorf("rescue the jobs of dead nodes: %w", err)
	}
	c.metrics.rescued.Add(float64(n))
	return n, nil
}

// Reap rescues the jobs of dead nodes and deletes nodes silent for longer
// than ReapAfter. It is a periodic maintenance task.
func (c *Cluster) Reap(ctx context.Context) (int64, error) {
	if !c.mayRescue() {
		return 0, nil // reaping, too, waits until the others had time to beat
	}
	if _, err := c.RescueDead(ctx); err != nil {
		return 0, fmt.Errorf("reap nodes: %w", err)
	}
	return nodesReap(ctx, c.opts.DB, c.opts.ReapAfter)
}

// Draining reports whether this node is draining.
func (c *Cluster) Draining() bool { return c.draining.Load() }

// ReadyCheck fails while the node drains, so load balancers stop sending to it.
func (c *Cluster) ReadyCheck(context.Context) error {
	if c.draining.Load() {
		return errors.New("the node is draining")
	}
	return nil
}

// DrainLocal drains this node without stopping it: readiness fails, the
// OnDrain hooks stop the claim loop and River, sockets are told
// server.draining and new ones refused. Idempotent.
func (c *Cluster) DrainLocal(ctx context.Context) {
	c.drainOnce.Do(func() {
		c.draining.Store(true)
		c.logger.Info("draining: readiness fails, no new tasks, jobs or sockets")
		for _, f := range c.opts.OnDrain {
			f()
		}
		c.opts.Sockets.DrainLocal()
		if err := nodeSetDraining(ctx, c.opts.DB, c.opts.NodeID); err != nil {
			c.logger.Warn("draining not recorded yet; the next heartbeat will", "error", err)
		}
	})
}

type noSockets struct{}

func (noSockets) LocalConnections() int { return 0 }
func (noSockets) DrainLocal()           {}
