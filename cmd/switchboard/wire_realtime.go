package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/realtime"
	"github.com/switchboard/switchboard/web"
	"github.com/switchboard/switchboard/workers"
)

// buildRealtime makes the bus on every replica (worker-only replicas publish
// run events through it) and the hub on web replicas, plus the maintenance
// that cleans up after them.
func (a *app) buildRealtime() {
	if a.cfg.HasRole(config.RoleWeb) {
		a.hub = realtime.NewHub(realtime.HubOptions{Logger: a.logger, Registry: a.registry, AllowedOrigins: a.cfg.AllowedOrigins, Limits: frameLimits(a.cfg.WSLimits)})
	}
	a.bus = realtime.NewBus(realtime.BusOptions{Pool: a.pool, NodeID: a.nodeID, Hub: a.hub, Logger: a.logger, Registry: a.registry})
	a.maintenance = append(a.maintenance, realtimeMaintenance(a.pool)...)
}

func realtimeMaintenance(pool *pgxpool.Pool) []workers.MaintenanceTask {
	return []workers.MaintenanceTask{
		{Name: "reap_ws_tickets", Every: time.Minute, Run: func(ctx context.Context) (int64, error) {
			return realtime.ReapTickets(ctx, pool)
		}},
		{Name: "delete_spilled_bus_messages", Every: time.Minute, Run: func(ctx context.Context) (int64, error) {
			return realtime.DeleteSpilled(ctx, pool, realtime.SpillRetention)
		}},
	}
}

// realtimeWebOptions gives the web server the realtime routes on web replicas.
func (a *app) realtimeWebOptions(o *web.Options) {
	if a.hub == nil {
		return
	}
	o.Tickets, o.Sockets, o.Events, o.RPC = realtime.Tickets{DB: a.pool}, a.hub, a.bus, a.bus
}

// startRealtime starts the bus; on web replicas it returns once LISTEN is up
// and readiness depends on it from then on.
func (a *app) startRealtime(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := a.bus.Start(ctx); err != nil {
		return fmt.Errorf("start realtime: %w", err)
	}
	if a.hub != nil {
		a.web.AddReadyCheck("listen", a.bus.Ready)
		a.web.AddReadyCheck("websockets", func(context.Context) error {
			if a.hub.Draining() {
				return realtime.ErrDraining
			}
			return nil
		})
	}
	return nil
}

// drainRealtime tells local sockets server.draining and closes them, before
// the HTTP server stops.
func (a *app) drainRealtime(ctx context.Context) {
	if a.hub != nil {
		a.hub.Shutdown(ctx)
	}
}

// stopRealtime sends what the bus still holds; after River, before the pool.
func (a *app) stopRealtime() {
	if a.bus != nil {
		a.bus.Stop()
	}
}

func frameLimits(l config.WSLimits) realtime.FrameLimits {
	return realtime.FrameLimits{
		ConnRate: l.ConnFrameRate, ConnBurst: l.ConnFrameBurst, UserRate: l.UserFrameRate, UserBurst: l.UserFrameBurst,
		UserBytes: l.UserByteRate, Strikes: l.Strikes, MaxConnsPerUser: l.MaxConnsPerUser,
	}
}
