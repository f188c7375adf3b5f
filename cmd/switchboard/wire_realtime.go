package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/realtime"
	"github.com/switchboard/switchboard/web"
)

// newRealtime makes the bus on every replica (worker-only replicas publish
// run events through it) and, on web replicas, the hub it delivers to and
// whose clients publish through it, with the tracker of who is in which
// room across the cluster.
func (a *app) newRealtime() *realtime.Realtime {
	stopTimeout := min(5*time.Second, a.cfg.ShutdownTimeout)
	opts := realtime.Options{Bus: realtime.BusOptions{Pool: a.pool, NodeID: a.nodeID, Store: realtime.Streams{DB: a.pool},
		Logger: a.logger, Registry: a.registry, StopTimeout: stopTimeout,
		ListenConfig: a.listenConfig(), PollOnly: a.cfg.PollOnly(), TracerProvider: a.tracing.TracerProvider(),
		Notices: a.notices()}}
	if a.cfg.HasRole(config.RoleWeb) {
		opts.Hub = &realtime.HubOptions{AllowedOrigins: a.cfg.AllowedOrigins, Limits: frameLimits(a.cfg.WSLimits),
			SendQueueBytes: a.cfg.SendQueueBytes, WriteWait: a.cfg.WSLimits.WriteWait, Store: a.streams(), Rooms: realtime.Rooms{DB: a.pool},
			Projects: realtime.Projects{DB: a.pool}}
		opts.Presence = &realtime.PresenceOptions{Nodes: clusterNodes{a}, StopTimeout: stopTimeout}
	}
	return realtime.New(opts)
}

// streams is the stream store reads go through, with the read budget.
func (a *app) streams() realtime.Streams {
	return realtime.Streams{DB: a.pool, ReadBytes: a.cfg.ReadBytes}
}

// clusterNodes is the cluster as presence asks it which nodes are dead.
// The cluster is built after realtime (it reports the hub's sockets), and
// presence asks only once started, so it reaches the cluster through the
// app.
type clusterNodes struct{ a *app }

func (n clusterNodes) DeadNodes(ctx context.Context) ([]string, time.Duration, error) {
	return n.a.cluster.DeadNodes(ctx)
}

// listenConfig is the bus's LISTEN connection: on
// SWITCHBOARD_LISTEN_DATABASE_URL when set, else the pool's.
func (a *app) listenConfig() *pgx.ConnConfig {
	if a.listenPool == nil {
		return nil
	}
	return a.listenPool.Config().ConnConfig.Copy()
}

// realtimeWebOptions gives the web server the realtime routes on web replicas.
func (a *app) realtimeWebOptions(o *web.Options) {
	if a.rt.Hub == nil {
		return
	}
	o.Tickets, o.Sockets, o.Events, o.RPC = realtime.Tickets{DB: a.pool}, a.rt.Hub, a.rt.Bus, a.rt.Bus
	o.History = a.streams()
	o.Rooms = realtime.Rooms{DB: a.pool, Quotas: a.cfg.Quotas.Limits()}
	o.Presence = a.rt.Presence
	// Readiness on web replicas: the LISTEN connection is up, the hub
	// takes sockets.
	o.ReadyChecks = []web.ReadyCheck{{Name: "listen", Check: a.rt.Bus.Ready}, {Name: "websockets", Check: a.rt.Hub.Ready}}
}

func frameLimits(l config.WSLimits) realtime.FrameLimits {
	return realtime.FrameLimits{
		ConnRate: l.ConnFrameRate, ConnBurst: l.ConnFrameBurst, UserRate: l.UserFrameRate, UserBurst: l.UserFrameBurst,
		UserBytes: l.UserByteRate, Strikes: l.Strikes, MaxConnsPerUser: l.MaxConnsPerUser,
	}
}
