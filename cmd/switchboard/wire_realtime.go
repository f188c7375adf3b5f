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
// whose clients publish through it.
func (a *app) newRealtime() (*realtime.Hub, *realtime.Bus) {
	var hub *realtime.Hub
	if a.cfg.HasRole(config.RoleWeb) {
		hub = realtime.NewHub(realtime.HubOptions{Logger: a.logger, Registry: a.registry, AllowedOrigins: a.cfg.AllowedOrigins,
			Limits: frameLimits(a.cfg.WSLimits), SendQueueBytes: a.cfg.SendQueueBytes, Store: realtime.Streams{DB: a.pool},
			Rooms: realtime.Rooms{DB: a.pool}})
	}
	bus := realtime.NewBus(realtime.BusOptions{Pool: a.pool, NodeID: a.nodeID, Hub: hub, Store: realtime.Streams{DB: a.pool},
		Logger: a.logger, Registry: a.registry, StopTimeout: min(5*time.Second, a.cfg.ShutdownTimeout),
		ListenConfig: a.listenConfig(), PollOnly: a.cfg.PollOnly(), TracerProvider: a.tracing.TracerProvider(),
		Notices: a.notices()})
	if hub != nil {
		hub.PublishThrough(bus)
	}
	return hub, bus
}

// newPresence makes, on web replicas, the tracker of who is in which room
// across the cluster: the hub tells it of its sockets' joins and leaves,
// the cluster which nodes are dead.
func (a *app) newPresence() *realtime.PresenceTracker {
	if a.hub == nil {
		return nil
	}
	p := realtime.NewPresence(realtime.PresenceOptions{DB: a.pool, NodeID: a.nodeID, Hub: a.hub, Nodes: a.cluster,
		Logger: a.logger, StopTimeout: min(5*time.Second, a.cfg.ShutdownTimeout)})
	a.hub.TrackPresence(p)
	return p
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
	if a.hub == nil {
		return
	}
	o.Tickets, o.Sockets, o.Events, o.RPC = realtime.Tickets{DB: a.pool}, a.hub, a.bus, a.bus
	o.History = realtime.Streams{DB: a.pool}
	o.Rooms = realtime.Rooms{DB: a.pool}
	o.Presence = a.presence
}

// wireRealtime makes readiness depend, on web replicas, on the LISTEN
// connection and on the hub not draining.
func (a *app) wireRealtime() {
	if a.hub == nil {
		return
	}
	a.web.AddReadyCheck("listen", a.bus.Ready)
	a.web.AddReadyCheck("websockets", func(context.Context) error {
		if a.hub.Draining() {
			return realtime.ErrDraining
		}
		return nil
	})
}

func frameLimits(l config.WSLimits) realtime.FrameLimits {
	return realtime.FrameLimits{
		ConnRate: l.ConnFrameRate, ConnBurst: l.ConnFrameBurst, UserRate: l.UserFrameRate, UserBurst: l.UserFrameBurst,
		UserBytes: l.UserByteRate, Strikes: l.Strikes, MaxConnsPerUser: l.MaxConnsPerUser,
	}
}
