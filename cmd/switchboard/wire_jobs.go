package main

import (
	"context"
	"fmt"
	"time"

	"riverqueue.com/riverui"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/ratelimit"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/realtime"
	"github.com/switchboard/switchboard/realtime/stream"
	"github.com/switchboard/switchboard/web"
	"github.com/switchboard/switchboard/workers"
)

// scheduling is the claim loop and the maintenance loop (worker role), the
// River UI (web role) and the metrics they share with the workers and the
// API.
type scheduling struct {
	metrics   *jobs.Metrics
	announcer *jobs.Announcer // every run status change the users hear of
	claimer   *jobs.Claimer
	riverUI   *lazyRiverUI

	maintenance *workers.MaintenanceLoop
}

// workerOptions are the River worker options of a worker replica: run
// events go out through the bus, and the maintenance tasks get what they
// need (workers declares them).
func (a *app) workerOptions() workers.Options {
	return workers.Options{
		Logger: a.logger, ClientID: a.nodeID, DB: a.pool, MaxWorkers: a.cfg.RunWorkers,
		Publisher: a.bus, Rooms: realtime.Rooms{DB: a.pool}, Metrics: a.jobs.metrics,
		Webhook: workers.WebhookOptions{AllowPrivate: a.cfg.WebhookPrivate, UserAgent: "Switchboard-Webhook/" + version,
			TracerProvider: a.tracing.TracerProvider()},
		RunRetention:       a.cfg.RunRetention,
		StreamRetention:    stream.Retention{MaxEvents: a.cfg.StreamMaxEvents, MaxAge: a.cfg.StreamMaxAge},
		RateLimitRetention: ratelimit.Retention(a.authRate(), a.userRate(), a.apiKeyRate()),
		ReapNodes:          a.cluster.Reap,
		PruneIdempotency:   func(ctx context.Context) (int64, error) { return web.PruneIdempotencyKeys(ctx, a.pool) },
		Releaser:           laterReleaser{a},
	}
}

// laterReleaser hands retry and snooze times to the claim loop's releaser;
// the workers are made before the claim loop (which needs their client).
type laterReleaser struct{ a *app }

func (l laterReleaser) ReleaseAt(t time.Time) {
	if c := l.a.jobs.claimer; c != nil {
		c.ReleaseAt(t)
	}
}

// newScheduling makes the claim loop on worker replicas and the River UI
// on web replicas; they share metrics with the workers.
func (a *app) newScheduling(metrics *jobs.Metrics, announcer *jobs.Announcer) (scheduling, error) {
	s := scheduling{metrics: metrics, announcer: announcer}
	if a.cfg.HasRole(config.RoleWorker) {
		s.claimer = jobs.NewClaimer(jobs.ClaimerOptions{
			DB: a.pool, River: a.river.Client(), Logger: a.logger, Metrics: s.metrics, Announcer: s.announcer,
			Lead:     a.cfg.ClaimLead,
			IdlePoll: a.cfg.ClaimIdlePoll, Listening: a.bus.Listening,
			Outlook: a.river.Outlook,
		})
		a.river.SetLook(s.claimer.Look)
		s.maintenance = workers.NewMaintenanceLoop(workers.MaintenanceLoopOptions{
			DB: a.pool, Tasks: workers.Maintenance(a.workerOptions()), Logger: a.logger, Registry: a.registry,
		})
	}
	if a.cfg.HasRole(config.RoleWeb) {
		logger := a.logger.With("component", "riverui")
		ui, err := newLazyRiverUI(func() (*riverui.Handler, error) {
			return riverui.NewHandler(&riverui.HandlerOpts{
				Endpoints: riverui.NewEndpoints(a.river.Client(), nil), Logger: logger, Prefix: "/riverui",
			})
		}, logger)
		if err != nil {
			return s, fmt.Errorf("river ui: %w", err)
		}
		s.riverUI = ui
	}
	return s, nil
}

// webServices: the River UI's background services, on web replicas; they
// run only while the UI is in use (lazyRiverUI).
func (s *scheduling) webServices() []service {
	if s.riverUI == nil {
		return nil
	}
	return []service{onStop("river ui", s.riverUI.Stop)}
}

// workerServices: the claim loop, on worker replicas, after River so that
// claimed jobs find a running client here too; then the maintenance loop
// (it needs no River), stopped first, while the bus and the cluster its
// tasks use still run.
func (s *scheduling) workerServices() []service {
	if s.claimer == nil {
		return nil
	}
	return []service{component("claim loop", s.claimer), component("maintenance loop", s.maintenance)}
}

// pause stops claiming: a draining node claims no new ticks and no new
// maintenance periods (the runs under way finish).
func (s *scheduling) pause() {
	if s.claimer != nil {
		s.claimer.SetPaused(true)
		s.maintenance.SetPaused(true)
	}
}

// jobsWebOptions gives the web server the task routes' dependencies and,
// on web replicas, the River UI.
func (a *app) jobsWebOptions(o *web.Options) {
	o.River, o.WebhookAllowPrivate = a.river.Client(), a.cfg.WebhookPrivate
	o.RunAnnouncer = a.jobs.announcer
	if a.jobs.claimer != nil {
		o.TasksChanged = a.jobs.claimer.Notify // wakes the local claim loop after an API change
	}
	if a.jobs.riverUI != nil {
		o.RiverUI = a.jobs.riverUI
	}
}
