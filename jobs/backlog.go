package jobs

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/infra/cluster"
	"github.com/switchboard/switchboard/infra/db"
)

// ScalerQuery is the chart's KEDA PostgreSQL trigger query: the backlog
// query's (backlogSQL, riverschema.go) demand column alone (KEDA reads one value). The chart renders the
// same text from chart/files/backlog.sql; the chart tests compare them.
var ScalerQuery = "SELECT demand FROM (\n" + backlogSQL + ") AS backlog"

// ReadBacklog reads the scaler's figures in one query. Its cost follows the
// unfinished jobs and due tasks (index-only scans), not the job history.
func ReadBacklog(ctx context.Context, q db.DB) (cluster.Backlog, error) {
	var b cluster.Backlog
	var oldestReady, oldestDue float64
	err := q.QueryRow(ctx, backlogSQL).Scan(&b.Demand, &b.AvailableJobs, &b.ScheduledJobs, &b.ScheduledDueJobs,
		&b.RunningJobs, &oldestReady, &b.DueTasks, &oldestDue, &b.NotificationQueueUsage)
	if err != nil {
		return cluster.Backlog{}, fmt.Errorf("read backlog: %w", err)
	}
	b.OldestAvailableAgeMS = secondsToMS(oldestReady)
	b.OldestDueAgeMS = secondsToMS(oldestDue)
	return b, nil
}

func secondsToMS(s float64) int64 { return max(int64(s*1000), 0) }

// BacklogOptions configure a BacklogReader; zero values mean defaults.
type BacklogOptions struct {
	DB     db.DB
	Logger *slog.Logger
	// MaxAge is how long a reading is reused; default 1s. It bounds the
	// query to one per MaxAge per node however often /metrics is scraped
	// and the status asked.
	MaxAge time.Duration
	// Timeout bounds one query; default 2s.
	Timeout time.Duration
}

// BacklogReader reads the backlog at most once per MaxAge and exports it
// as Prometheus gauges (it is a prometheus.Collector). Every node, web or
// worker, exports the same cluster-wide figures, so a Prometheus trigger
// still sees them with no worker running.
type BacklogReader struct {
	opts   BacklogOptions
	mu     sync.Mutex // held during the query: concurrent readers share one
	last   cluster.Backlog
	err    error
	at     time.Time
	errors int64
}

// NewBacklogReader builds a reader; register it on a Prometheus registry
// to export the gauges.
func NewBacklogReader(opts BacklogOptions) *BacklogReader {
	opts.MaxAge = cmp.Or(opts.MaxAge, time.Second)
	opts.Timeout = cmp.Or(opts.Timeout, 2*time.Second)
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	return &BacklogReader{opts: opts}
}

// Read returns the latest reading, querying when it is older than MaxAge.
// A failed query is remembered for MaxAge too, so a database outage is not
// hammered by scrapes.
func (r *BacklogReader) Read(ctx context.Context) (cluster.Backlog, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < r.opts.MaxAge {
		return r.last, r.err
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	r.last, r.err = ReadBacklog(ctx, r.opts.DB)
	r.at = time.Now()
	if r.err != nil {
		r.errors++
	}
	return r.last, r.err
}

// backlogGauge is one exported figure of a reading.
type backlogGauge struct {
	desc  *prometheus.Desc
	value func(cluster.Backlog) float64
}

var (
	backlogGauges = []backlogGauge{
		{gaugeDesc("switchboard_backlog_demand", "Ready jobs + running jobs + due tasks: the work the worker pool has now (the chart's KEDA trigger scales on it). Cluster-wide; every node exports the same value."),
			func(b cluster.Backlog) float64 { return float64(b.Demand) }},
		{gaugeDesc("switchboard_backlog_available_jobs", "River jobs waiting for a worker. Cluster-wide."),
			func(b cluster.Backlog) float64 { return float64(b.AvailableJobs) }},
		{gaugeDesc("switchboard_backlog_scheduled_jobs", "River jobs scheduled or waiting to retry, due or not. Cluster-wide."),
			func(b cluster.Backlog) float64 { return float64(b.ScheduledJobs) }},
		{gaugeDesc("switchboard_backlog_scheduled_due_jobs", "Scheduled or retryable River jobs whose time has come. Cluster-wide."),
			func(b cluster.Backlog) float64 { return float64(b.ScheduledDueJobs) }},
		{gaugeDesc("switchboard_backlog_running_jobs", "River jobs running now. Cluster-wide."),
			func(b cluster.Backlog) float64 { return float64(b.RunningJobs) }},
		{gaugeDesc("switchboard_backlog_oldest_available_age_seconds", "How long the oldest ready job has waited; 0 without one. Cluster-wide."),
			func(b cluster.Backlog) float64 { return float64(b.OldestAvailableAgeMS) / 1000 }},
		{gaugeDesc("switchboard_backlog_due_tasks", "Active tasks whose next tick is due and not yet claimed. Cluster-wide."),
			func(b cluster.Backlog) float64 { return float64(b.DueTasks) }},
		{gaugeDesc("switchboard_backlog_oldest_due_age_seconds", "How long the oldest due tick has waited; 0 without one. Cluster-wide."),
			func(b cluster.Backlog) float64 { return float64(b.OldestDueAgeMS) / 1000 }},
		{gaugeDesc("switchboard_notification_queue_usage_ratio", "pg_notification_queue_usage(): the fraction of PostgreSQL's NOTIFY queue in use."),
			func(b cluster.Backlog) float64 { return b.NotificationQueueUsage }},
	}
	backlogErrorsDesc = prometheus.NewDesc("switchboard_backlog_read_errors_total",
		"Backlog queries that failed on this node; the backlog gauges are left out of a scrape whose reading failed.", nil, nil)
)

func gaugeDesc(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }

// Describe implements prometheus.Collector.
func (r *BacklogReader) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range backlogGauges {
		ch <- g.desc
	}
	ch <- backlogErrorsDesc
}

// Collect implements prometheus.Collector: one (cached) reading per scrape.
// A failed reading leaves the gauges out, rather than reporting zeros a
// scaler would act on, and counts the failure.
func (r *BacklogReader) Collect(ch chan<- prometheus.Metric) {
	b, err := r.Read(context.Background())
	if err != nil {
		r.opts.Logger.Warn("read backlog for metrics", "error", err)
	} else {
		for _, g := range backlogGauges {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value(b))
		}
	}
	r.mu.Lock()
	n := r.errors
	r.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(backlogErrorsDesc, prometheus.CounterValue, float64(n))
}
