package main

import (
	"context"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/web"
)

// newCluster makes this process a cluster node: registered at Start,
// heartbeating, reachable by the others on the internal routes. The job
// queue reaches it through its hooks (rescue, status figures), the hub
// through Sockets and the fan-out actions.
func (a *app) newCluster(announcer *jobs.Announcer) *cluster.Cluster {
	var sockets cluster.Sockets // nil on worker-only replicas: no hub
	disconnect := func(context.Context, string) int { return 0 }
	if hub := a.rt.Hub; hub != nil {
		sockets = hub
		disconnect = func(_ context.Context, userID string) int { return hub.DisconnectUserLocal(userID) }
	}
	// The scaler's figures: exported by every node (web too, so a pool
	// scaled to zero is still seen) and shown in the status, one cached read.
	backlog := jobs.NewBacklogReader(jobs.BacklogOptions{DB: a.pool, Logger: a.logger})
	a.registry.MustRegister(backlog)
	queue := jobs.NodeJobs{DB: a.pool, NodeID: a.nodeID, Logger: a.logger, Announcer: announcer, Backlog: backlog}
	return cluster.New(cluster.Options{
		DB: a.pool, Logger: a.logger, Registry: a.registry,
		NodeID: a.nodeID, Name: config.Hostname(), Roles: a.cfg.Roles, Version: version,
		Addr: func() string {
			return cluster.AdvertiseAddr(a.cfg.AdvertiseAddr, []string{a.cfg.FlyPrivateIP, a.cfg.PodIP}, a.listener.Addr())
		},
		Secret: []byte(a.cfg.ClusterSecret), Sockets: sockets,
		// The operator actions fanned out to every node (see web/cluster.go).
		Actions: []cluster.Action{
			{Name: web.ActionDisconnectUser, Apply: disconnect},
		},
		OnDrain:    []func(){a.drainWork},
		RescueJobs: queue.Rescue, Work: queue.Work,
	})
}

// drainWork stops this node taking new work: the claim loop pauses (the
// other nodes claim the ticks), River stops fetching jobs and the
// maintenance loop claims no new periods.
func (a *app) drainWork() { a.jobs.drain() }
