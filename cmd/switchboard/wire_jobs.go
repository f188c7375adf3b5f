package main

import (
	"context"
	"fmt"

	"riverqueue.com/riverui"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/ratelimit"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/realtime"
	"github.com/switchboard/switchboard/realtime/stream"
	"github.com/switchboard/switchboard/web"
	"github.com/switchboard/switchboard/workers"
)

// scheduling is the job queue of a replica: River and, on worker replicas,
// the claim loop (one Coordinator), the maintenance loop (worker role),
// the River UI (web role), and the metrics and announcer they share with
// the API.
type scheduling struct {
	metrics   *jobs.Metrics
	announcer *jobs.Announcer // every run status change the users hear of
	queue     *workers.Coordinator
	riverUI   *lazyRiverUI

	maintenance *workers.MaintenanceLoop
}

// newNotices makes, on worker replicas, the job queue's notices the bus's
// LISTEN connection hears for the Coordinator: task changes, and River's
// insert notifications where River parks.
func (a *app) newNotices(ctx context.Context) (*workers.Notices, error) {
	if !a.cfg.HasRole(config.RoleWorker) {
		return nil, nil
	}
	return workers.NewNotices(ctx, a.pool, a.parkAfter() > 0)
}

// notices are the bus's Notices: the job queue's (none on web-only
// replicas).
func (a *app) notices() map[string]func() { return a.jobNotices.Handlers() }

// workerOptions are the River worker options of a worker replica, but for
// the metrics: run events go out through the bus, and the maintenance
// tasks get what they need (workers declares them).
func (a *app) workerOptions() workers.Options {
	return workers.Options{
		Logger: a.logger, ClientID: a.nodeID, DB: a.pool, MaxWorkers: a.cfg.RunWorkers,
		Publisher: a.bus, Rooms: realtime.Rooms{DB: a.pool},
		Webhook: workers.WebhookOptions{AllowPrivate: a.cfg.WebhookPrivate, UserAgent: "Switchboard-Webhook/" + version,
			TracerProvider: a.tracing.TracerProvider()},
		RunRetention:       a.cfg.RunRetention,
		StreamRetention:    stream.Retention{MaxEvents: a.cfg.StreamMaxEvents, MaxAge: a.cfg.StreamMaxAge},
		RateLimitRetention: ratelimit.Retention(a.authRate(), a.userRate(), a.apiKeyRate()),
		ReapNodes:          a.cluster.Reap,
		PruneIdempotency:   func(ctx context.Context) (int64, error) { return web.PruneIdempotencyKeys(ctx, a.pool) },
	}
}

// newScheduling makes the job queue: River on every replica, working with
// the claim loop and the maintenance loop on worker replicas, and the
// River UI on web replicas.
func (a *app) newScheduling(metrics *jobs.Metrics, announcer *jobs.Announcer) (scheduling, error) {
	s := scheduling{metrics: metrics, announcer: announcer}
	worker := a.cfg.HasRole(config.RoleWorker)
	wopts := a.workerOptions()
	wopts.Metrics = metrics
	var err error
	s.queue, err = workers.NewCoordinator(workers.CoordinatorOptions{
		River: workers.RiverOptions{
			Pool: a.pool, ListenPool: a.listenPool, PollOnly: a.cfg.PollOnly(), Logger: a.logger, ClientID: a.nodeID,
			StopTimeout: a.cfg.ShutdownTimeout, Work: worker, Workers: wopts,
			TracerProvider: a.tracing.TracerProvider(), Park: workers.ParkOptions{After: a.parkAfter()},
		},
		Claim: jobs.ClaimerOptions{Metrics: metrics, Announcer: announcer,
			Pacing: jobs.Pacing{Lead: a.cfg.ClaimLead, IdlePoll: a.cfg.ClaimIdlePoll}},
		Listening: a.bus.Listening, Notices: a.jobNotices,
	})
	if err != nil {
		return s, err
	}
	if worker {
		s.maintenance = workers.NewMaintenanceLoop(workers.MaintenanceLoopOptions{
			DB: a.pool, Tasks: workers.Maintenance(wopts), Logger: a.logger, Registry: a.registry,
		})
	}
	if a.cfg.HasRole(config.RoleWeb) {
		if s.riverUI, err = a.newRiverUI(s.queue); err != nil {
			return s, err
		}
	}
	return s, nil
}

// newRiverUI makes the River UI on queue's client.
func (a *app) newRiverUI(queue *workers.Coordinator) (*lazyRiverUI, error) {
	logger := a.logger.With("component", "riverui")
	client := queue.Client()
	ui, err := newLazyRiverUI(func() (*riverui.Handler, error) {
		return riverui.NewHandler(&riverui.HandlerOpts{
			Endpoints: riverui.NewEndpoints(client, nil), Logger: logger, Prefix: "/riverui",
		})
	}, logger)
	if err != nil {
		return nil, fmt.Errorf("river ui: %w", err)
	}
	return ui, nil
}

// webServices: the River UI's background services, on web replicas; they
// run only while the UI is in use (lazyRiverUI).
func (s *scheduling) webServices() []service {
	if s.riverUI == nil {
		return nil
	}
	return []service{onStop("river ui", s.riverUI.Stop)}
}

// queueServices: River and the claim loop (the Coordinator starts River
// first, so that claimed jobs find a running client here too); then, on
// worker replicas, the maintenance loop (it needs no River), stopped
// first, while the bus and the cluster its tasks use still run.
func (s *scheduling) queueServices() []service {
	list := []service{component("job queue", s.queue)}
	if s.maintenance != nil {
		list = append(list, component("maintenance loop", s.maintenance))
	}
	return list
}

// drain stops this replica taking new work: no new ticks, jobs or
// maintenance periods (the runs under way finish).
func (s *scheduling) drain() {
	s.queue.Drain()
	if s.maintenance != nil {
		s.maintenance.SetPaused(true)
	}
}

// jobsWebOptions gives the web server the task routes' dependencies and,
// on web replicas, the River UI.
func (a *app) jobsWebOptions(o *web.Options) {
	o.River, o.WebhookAllowPrivate = a.jobs.queue.Client(), a.cfg.WebhookPrivate
	o.RunAnnouncer = a.jobs.announcer
	o.TasksChanged = a.jobs.queue.TasksChanged // wakes the local claim loop after an API change
	if a.jobs.riverUI != nil {
		o.RiverUI = a.jobs.riverUI
	}
}
