package jobs

import (
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
}

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
	}
	reg.MustRegister(m.runs, m.batch, m.lag, m.skipped, m.due, m.oldestDue)
	// Export every series from the start, at zero.
	for _, s := range RunStatuses {
		m.runs.WithLabelValues(s)
	}
	m.skipped.WithLabelValues("missed")
	m.skipped.WithLabelValues("overlap")
	return m
}

// RunStatus counts n runs moving to status (jobs.Announcer counts every
// announced one).
func (m *Metrics) RunStatus(status string, n int) {
	if m != nil && n > 0 {
		m.runs.WithLabelValues(status).Add(float64(n))
	}
}

// DueLag records how late a scheduled run started.
func (m *Metrics) DueLag(d time.Duration) {
	if m != nil {
		m.lag.Observe(max(d, 0).Seconds())
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
