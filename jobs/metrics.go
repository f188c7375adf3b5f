package jobs

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the scheduler's and run worker's Prometheus series. One value
// per process, shared by the claim loop, the run worker and the API; a nil
// *Metrics records nothing.
type Metrics struct {
	runs      *prometheus.CounterVec
	batch     prometheus.Histogram
	lag       prometheus.Histogram
	skipped   *prometheus.CounterVec
	due       prometheus.Gauge
	oldestDue prometheus.Gauge
	duration  *prometheus.HistogramVec
	queueWait *prometheus.HistogramVec
	webhook   *prometheus.HistogramVec
}

// Run attempt outcomes, the outcome label of switchboard_run_duration_seconds.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeRetried   = "retried" // failed, and another attempt follows
)

// durationBuckets span a publish (milliseconds) to a slow webhook (the
// longest task timeout is minutes).
var durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_task_runs_total",
			Help: "Task run status changes announced to their owners, by new status (queued: a run created, or queued again for a retry or after its node died).",
		}, []string{"status"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_claim_batch_size",
			Help:    "Due tasks claimed per claim transaction.",
			Buckets: []float64{0, 1, 5, 10, 25, 50, 100, 250, 500, 1000},
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_task_due_lag_seconds",
			Help:    "Time from a scheduled tick to its run starting (first attempt).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_task_ticks_skipped_total",
			Help: "Ticks that produced no run: missed (no claimer ran in time, folded into one run) or overlap (a run was still active).",
		}, []string{"reason"}),
		due: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_tasks_due",
			Help: "Active tasks whose next tick is due and not yet claimed, as last seen by this node's claim loop.",
		}),
		oldestDue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_tasks_oldest_due_age_seconds",
			Help: "Age of the oldest unclaimed due tick, as last seen by this node's claim loop.",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_run_duration_seconds",
			Help:    "Duration of a run attempt's action (webhook call or publish) by action type and outcome (succeeded, failed, retried).",
			Buckets: durationBuckets,
		}, []string{"action", "outcome"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_run_queue_wait_seconds",
			Help:    "Time from a run's scheduled_for (its tick, or when it was triggered or asked to run) to its first attempt starting, by trigger.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900},
		}, []string{"trigger"}),
		webhook: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_webhook_duration_seconds",
			Help:    "Duration of webhook calls by the answer's status class (2xx, 3xx, 4xx, 5xx) or error (no answer: refused, timed out, TLS).",
			Buckets: durationBuckets,
		}, []string{"class"}),
	}
	reg.MustRegister(m.runs, m.batch, m.lag, m.skipped, m.due, m.oldestDue, m.duration, m.queueWait, m.webhook)
	// Export every series from the start, at zero.
	for _, s := range RunStatuses {
		m.runs.WithLabelValues(s)
	}
	m.skipped.WithLabelValues("missed")
	m.skipped.WithLabelValues("overlap")
	for _, a := range []string{ActionWebhook, ActionPublish} {
		for _, o := range []string{OutcomeSucceeded, OutcomeFailed, OutcomeRetried} {
			m.duration.WithLabelValues(a, o)
		}
	}
	m.queueWait.WithLabelValues(TriggerSchedule)
	m.queueWait.WithLabelValues(TriggerManual)
	for _, c := range []string{"2xx", "3xx", "4xx", "5xx", "error"} {
		m.webhook.WithLabelValues(c)
	}
	return m
}

// attempt records how long one attempt's action took and how it ended;
// an attempt interrupted by its worker stopping is not counted.
func (m *Metrics) attempt(action string, o Outcome) {
	if m == nil || o.Interrupted {
		return
	}
	outcome := o.Status
	if o.Status == StatusQueued {
		outcome = OutcomeRetried
	}
	m.duration.WithLabelValues(action, outcome).Observe(max(o.Duration, 0).Seconds())
}

// started records how long a run waited from its scheduled_for to its
// first attempt starting, by trigger, and a tick's also as its due lag.
func (m *Metrics) started(r Run) {
	if m == nil || r.Attempt != 1 || r.StartedAt == nil {
		return
	}
	wait := max(r.StartedAt.Sub(r.ScheduledFor), 0).Seconds()
	m.queueWait.WithLabelValues(r.Trigger).Observe(wait)
	if r.Trigger == TriggerSchedule {
		m.lag.Observe(wait)
	}
}

// WebhookCall records one webhook call: status is the answer's HTTP
// status, 0 when there was none (err).
func (m *Metrics) WebhookCall(status int, d time.Duration) {
	if m != nil {
		m.webhook.WithLabelValues(statusClass(status)).Observe(max(d, 0).Seconds())
	}
}

// statusClass is "2xx".."5xx", or "error" for no (or no valid) answer.
func statusClass(status int) string {
	if status < 200 || status > 599 {
		return "error"
	}
	return fmt.Sprintf("%dxx", status/100)
}

// RunStatus counts n runs moving to status (jobs.Announcer counts every
// announced one).
func (m *Metrics) RunStatus(status string, n int) {
	if m != nil && n > 0 {
		m.runs.WithLabelValues(status).Add(float64(n))
	}
}

func (m *Metrics) claimed(n int) {
	if m != nil {
		m.batch.Observe(float64(n))
	}
}

func (m *Metrics) skippedTicks(reason string, n int) {
	if m != nil && n > 0 {
		m.skipped.WithLabelValues(reason).Add(float64(n))
	}
}

func (m *Metrics) backlog(due int, oldest time.Duration) {
	if m != nil {
		m.due.Set(float64(due))
		m.oldestDue.Set(oldest.Seconds())
	}
}
