// Package workers owns the consumer side of the job queue: the River workers
// that run task runs and periodic maintenance, and the River configuration a
// worker replica starts with.
package workers

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/riverqueue/river"
)

// Queue names.
const (
	QueueDefault     = river.QueueDefault
	QueueMaintenance = "maintenance"
)

// Options configure the worker side; zero values mean defaults.
type Options struct {
	Logger *slog.Logger
	// ClientID names this process in River (its cluster node id).
	ClientID string
	// MaxWorkers for task runs; default 50.
	MaxWorkers int
	// Maintenance tasks to run periodically, keyed by name.
	Maintenance []MaintenanceTask
}

// RiverConfig returns the configuration of a River client that works jobs.
func RiverConfig(opts Options) (*river.Config, error) {
	logger := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	w := river.NewWorkers()
	m := newMaintenanceWorker(opts.Maintenance, logger)
	if err := river.AddWorkerSafely(w, m); err != nil {
		return nil, fmt.Errorf("add maintenance worker: %w", err)
	}
	return &river.Config{
		ID:     opts.ClientID,
		Logger: logger.With("component", "river"),
		Queues: map[string]river.QueueConfig{
			QueueDefault:     {MaxWorkers: cmp.Or(opts.MaxWorkers, 50)},
			QueueMaintenance: {MaxWorkers: 2},
		},
		Workers:      w,
		PeriodicJobs: m.periodicJobs(),
	}, nil
}

// MaintenanceTask is one idempotent housekeeping step (prune old runs, reap
// expired tickets, ...), run every Every by whichever replica River's leader
// hands the job to.
type MaintenanceTask struct {
	Name  string
	Every time.Duration
	Run   func(ctx context.Context) (affected int64, err error)
}

// MaintenanceArgs names the task a maintenance job runs.
type MaintenanceArgs struct {
	Task string `json:"task"`
}

// Kind is River's job kind.
func (MaintenanceArgs) Kind() string { return "maintenance" }

// InsertOpts routes maintenance to its own queue and keeps one pending job
// per task.
func (MaintenanceArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: time.Minute}}
}

type maintenanceWorker struct {
	river.WorkerDefaults[MaintenanceArgs]
	tasks  map[string]MaintenanceTask
	logger *slog.Logger
}

func newMaintenanceWorker(tasks []MaintenanceTask, logger *slog.Logger) *maintenanceWorker {
	m := &maintenanceWorker{tasks: map[string]MaintenanceTask{}, logger: logger}
	for _, t := range tasks {
		m.tasks[t.Name] = t
	}
	return m
}

func (m *maintenanceWorker) Work(ctx context.Context, job *river.Job[MaintenanceArgs]) error {
	t, ok := m.tasks[job.Args.Task]
	if !ok {
		// A job left by a newer or older version: nothing to do here.
		return river.JobCancel(fmt.Errorf("unknown maintenance task %q", job.Args.Task))
	}
	start := time.Now()
	n, err := t.Run(ctx)
	if err != nil {
		return fmt.Errorf("maintenance %s: %w", t.Name, err)
	}
	m.logger.Info("maintenance done", "task", t.Name, "affected", n, "duration_ms", time.Since(start).Milliseconds())
	return nil
}

func (m *maintenanceWorker) periodicJobs() []*river.PeriodicJob {
	names := make([]string, 0, len(m.tasks))
	for n := range m.tasks {
		names = append(names, n)
	}
	sort.Strings(names)
	jobs := make([]*river.PeriodicJob, 0, len(names))
	for _, n := range names {
		t := m.tasks[n]
		jobs = append(jobs, river.NewPeriodicJob(river.PeriodicInterval(t.Every),
			func() (river.JobArgs, *river.InsertOpts) { return MaintenanceArgs{Task: t.Name}, nil },
			&river.PeriodicJobOpts{ID: "maintenance." + t.Name}))
	}
	return jobs
}
