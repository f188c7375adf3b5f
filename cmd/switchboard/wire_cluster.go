package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/workers"
)

// buildCluster makes this process a cluster node: registered at Start,
// heartbeating, reachable by the others on the internal routes. After
// buildRealtime: it acts on the local hub.
func (a *app) buildCluster() {
	var sockets cluster.Sockets // nil on worker-only replicas: no hub
	if a.hub != nil {
		sockets = a.hub
	}
	a.cluster = cluster.New(cluster.Options{
		DB: a.pool, Logger: a.logger, Registry: a.registry,
		NodeID: a.nodeID, Name: config.Hostname(), Roles: a.cfg.Roles, Version: version,
		Addr: func() string {
			return cluster.AdvertiseAddr(a.cfg.AdvertiseAddr, []string{a.cfg.FlyPrivateIP, a.cfg.PodIP}, a.listener.Addr())
		},
		Secret: []byte(a.cfg.ClusterSecret), Sockets: sockets,
		OnDrain: []func(){a.stopClaiming, a.stopTakingJobs},
		Rescued: recordRescuedRuns,
	})
	a.maintenance = append(a.maintenance, a.clusterMaintenance())
}

// recordRescuedRuns puts the runs of task-run jobs rescued from a dead node
// back to queued (or failed, attempts spent), in the rescue's transaction.
func recordRescuedRuns(ctx context.Context, tx pgx.Tx, rescued []cluster.RescuedJob) error {
	var runs []jobs.RescuedRun
	for _, j := range rescued {
		var args jobs.RunArgs
		if j.Kind != args.Kind() || json.Unmarshal(j.Args, &args) != nil || args.RunID == "" {
			continue
		}
		runs = append(runs, jobs.RescuedRun{RunID: args.RunID, DeadNode: j.DeadNode, Discarded: j.State == "discarded"})
	}
	_, err := jobs.RunsRescued(ctx, tx, runs)
	return err
}

// clusterMaintenance removes nodes silent for over a minute (rescuing
// their running jobs first, should no heartbeat have done it).
func (a *app) clusterMaintenance() workers.MaintenanceTask {
	return workers.MaintenanceTask{Name: "reap_cluster_nodes", Every: time.Minute, Run: a.cluster.Reap}
}

// wireCluster mounts the internal routes and makes readiness fail while
// the node drains.
func (a *app) wireCluster() {
	a.web.Router().Mount(cluster.InternalPrefix, a.cluster.Handler())
	a.web.AddReadyCheck("draining", a.cluster.ReadyCheck)
}

// riverDrain is River's soft stop started by a drain, so that a later
// shutdown can take over from it.
type riverDrain struct {
	mu       sync.Mutex
	stopping bool
	cancel   context.CancelFunc
	done     chan struct{}
}

// stopClaiming pauses this node's claim loop; the others claim the ticks.
func (a *app) stopClaiming() {
	if a.jobs.claimer != nil {
		a.jobs.claimer.SetPaused(true)
	}
}

// stopTakingJobs stops River fetching jobs on this node; running jobs
// finish. River's queue pause would be cluster-wide, so the client stops.
func (a *app) stopTakingJobs() {
	if !a.cfg.HasRole(config.RoleWorker) {
		return
	}
	a.drain.mu.Lock()
	defer a.drain.mu.Unlock()
	if a.drain.stopping || a.drain.done != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.drain.cancel, a.drain.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		if err := a.river.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
			a.logger.Warn("river stop while draining", "error", err)
		}
	}(a.drain.done)
}

// endDrainStop hands River's stop over to the shutdown: a drain's soft
// stop is cancelled (River then lets a new Stop begin with the shutdown's
// deadline) and none is started afterwards.
func (a *app) endDrainStop() {
	a.drain.mu.Lock()
	a.drain.stopping = true
	cancel, done := a.drain.cancel, a.drain.done
	a.drain.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
