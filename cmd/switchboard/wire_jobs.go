package main

import (
	"context"
	"fmt"

	"riverqueue.com/riverui"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/web"
	"github.com/switchboard/switchboard/workers"
)

// jobsParts are the scheduling components of a replica: the claim loop
// (worker role), the River UI (web role), the publisher of run events and
// the metrics they share.
type jobsParts struct {
	metrics   *jobs.Metrics
	publisher workers.Publisher
	claimer   *jobs.Claimer
	riverUI   *riverui.Handler
	uiCancel  context.CancelFunc
}

// buildJobs makes the metrics and picks the publisher of run events: the
// realtime bus (every replica has one); call after buildRealtime and
// before buildRiver.
func (a *app) buildJobs() {
	a.jobs.metrics = jobs.NewMetrics(a.registry)
	a.jobs.publisher = workers.LogPublisher{Logger: a.logger}
	if a.bus != nil {
		a.jobs.publisher = a.bus
	}
}

// jobsWebOptions gives the web server the task routes' dependencies and,
// on web replicas, the River UI.
func (a *app) jobsWebOptions(o *web.Options) {
	o.River, o.WebhookAllowPrivate, o.TasksChanged = a.river, a.cfg.WebhookPrivate, a.tasksChanged
	o.RunEvents, o.JobMetrics = a.jobs.publisher, a.jobs.metrics
	if a.jobs.riverUI != nil {
		o.RiverUI = a.jobs.riverUI
	}
}

// workerOptions are the River worker options of a worker replica.
func (a *app) workerOptions() workers.Options {
	return workers.Options{
		Logger: a.logger, ClientID: a.nodeID, DB: a.pool,
		Publisher: a.jobs.publisher, Metrics: a.jobs.metrics,
		Webhook:      workers.WebhookOptions{AllowPrivate: a.cfg.WebhookPrivate, UserAgent: "Switchboard-Webhook/" + version},
		RunRetention: a.cfg.RunRetention,
	}
}

// buildScheduling makes the claim loop (worker role) and the River UI (web
// role); call after buildRiver.
func (a *app) buildScheduling() error {
	if a.cfg.HasRole(config.RoleWorker) {
		a.jobs.claimer = jobs.NewClaimer(jobs.ClaimerOptions{
			DB: a.pool, River: a.river, Logger: a.logger, Metrics: a.jobs.metrics, Publisher: a.jobs.publisher,
		})
	}
	if a.cfg.HasRole(config.RoleWeb) {
		ui, err := riverui.NewHandler(&riverui.HandlerOpts{
			Endpoints: riverui.NewEndpoints(a.river, nil), Logger: a.logger.With("component", "riverui"), Prefix: "/riverui",
		})
		if err != nil {
			return fmt.Errorf("river ui: %w", err)
		}
		a.jobs.riverUI = ui
	}
	return nil
}

// tasksChanged wakes the local claim loop after an API change.
func (a *app) tasksChanged() {
	if a.jobs.claimer != nil {
		a.jobs.claimer.Notify()
	}
}

// startScheduling starts the River UI's background services and the claim
// loop (after River, so claimed jobs find a running client here too).
func (a *app) startScheduling(ctx context.Context) error {
	if a.jobs.riverUI != nil {
		uctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		a.jobs.uiCancel = cancel
		if err := a.jobs.riverUI.Start(uctx); err != nil {
			return fmt.Errorf("start river ui: %w", err)
		}
	}
	if a.jobs.claimer != nil {
		if err := a.jobs.claimer.Start(ctx); err != nil {
			return fmt.Errorf("start claimer: %w", err)
		}
	}
	return nil
}

// stopScheduling stops claiming before River stops working jobs.
func (a *app) stopScheduling() {
	if a.jobs.claimer != nil {
		a.jobs.claimer.Stop()
	}
	if a.jobs.uiCancel != nil {
		a.jobs.uiCancel()
	}
}
