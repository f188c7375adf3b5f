// Package workers owns a replica's end of the job queue: the River client
// and its configuration, the run worker that performs task runs, parking
// (an idle worker replica's River stops until work is due), the
// Coordinator that builds River with the claim loop (package jobs) and
// carries their conversation, and the periodic maintenance
// (MaintenanceLoop, on Postgres: River may be parked while it runs).
package workers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/logging"
	"github.com/switchboard/switchboard/jobs"
	"github.com/switchboard/switchboard/realtime/stream"
)

// QueueDefault is the queue of task runs, the only one River works.
const QueueDefault = river.QueueDefault

// Options configure the worker side; zero values mean defaults.
type Options struct {
	Logger *slog.Logger
	// ClientID names this process in River (its cluster node id).
	ClientID string
	// MaxWorkers for task runs; default DefaultMaxWorkers.
	MaxWorkers int
	// RateLimitRetention is how long rate limit windows are kept (see
	// ratelimit.Retention); 0 leaves their pruning out.
	RateLimitRetention time.Duration
	// ReapNodes is the cluster's Reap (dead nodes rescued, then deleted);
	// nil leaves it out.
	ReapNodes func(ctx context.Context) (int64, error)
	// PruneIdempotency deletes expired Idempotency-Key records (web owns
	// that table); nil leaves it out.
	PruneIdempotency func(ctx context.Context) (int64, error)

	// DB is the run worker's database and that of the maintenance tasks
	// of the tables; RiverConfig requires it.
	DB db.DB
	// Publisher delivers run events (through a jobs.Announcer) and publish
	// actions; default logs them.
	Publisher Publisher
	// Rooms is asked before a publish action posts to a room: the task's
	// owner must be able to use it (a members-only room's member). Nil:
	// every room is open.
	Rooms RoomAccess
	// Metrics of task runs and webhook calls; nil records nothing.
	Metrics *jobs.Metrics
	// Webhook configures the webhook client and its SSRF guard.
	Webhook WebhookOptions
	// RetryBackoff is the wait before retry n of a failed run attempt;
	// default DefaultBackoff. A Retry-After from the target wins if longer.
	RetryBackoff func(attempt int) time.Duration
	// RunRetention is how long finished runs are kept; default 30 days.
	RunRetention time.Duration
	// StreamRetention bounds each realtime stream; zero fields mean the
	// defaults (1000 events, 24 h).
	StreamRetention stream.Retention
}

// DefaultMaxWorkers is how many task runs a node works at once. Runs mostly
// wait on I/O, and their writes go through a RunWriter (a few batch
// statements for all of them), so workers are not bound to connections.
// 1000 lets a burst of 1000 ticks due at once start without waiting for
// worker slots: in BenchmarkDueLag (2 cores) p99 due→running was 139–165 ms
// with 1000 against 211–284 ms with 400, throughput unchanged.
const DefaultMaxWorkers = 1000

// RescueStuckJobsAfter is when River takes a job still running for stuck:
// the longest job (a task run at RunJobTimeout) plus a margin.
const RescueStuckJobsAfter = RunJobTimeout + 5*time.Minute

// RiverConfig returns the configuration of a River client that works task
// runs. opts.DB is required: the run worker is River's only worker (River
// starts no client without one), the maintenance runs outside River
// (MaintenanceLoop).
func RiverConfig(opts Options) (*river.Config, error) { return riverConfig(opts, nil) }

// riverConfig is RiverConfig whose run worker tells fetch (nil: nobody)
// when a retry or snooze makes its job fetchable again.
func riverConfig(opts Options, fetch fetchWatch) (*river.Config, error) {
	if opts.DB == nil {
		return nil, errors.New("river config: Options.DB is required (the run worker needs it)")
	}
	logger := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	w := river.NewWorkers()
	if err := river.AddWorkerSafely(w, newRunWorker(opts, logger, fetch)); err != nil {
		return nil, fmt.Errorf("add run worker: %w", err)
	}
	return &river.Config{
		ID:     opts.ClientID,
		Logger: logging.Demoted(logger).With("component", "river"),
		Queues: map[string]river.QueueConfig{
			QueueDefault: {MaxWorkers: cmp.Or(opts.MaxWorkers, DefaultMaxWorkers)},
		},
		// A fetch at most every 25ms: with 100 workers that allows about
		// 4000 jobs/s per node; the default (100ms) caps a node near 1000.
		FetchCooldown: 25 * time.Millisecond,
		// Task runs have their own RunJobTimeout; River's default minute is
		// only a floor. River rescues a job still running after
		// RescueStuckJobsAfter, so it must outlast the longest run; the
		// cluster rescues the jobs of a dead node much sooner.
		JobTimeout:           time.Minute,
		RescueStuckJobsAfter: RescueStuckJobsAfter,
		Workers:              w,
		// Runs claimed ahead of their tick are inserted available at it.
		Middleware: []rivertype.Middleware{&jobs.InsertAvailable{}},
	}, nil
}

func newRunWorker(opts Options, logger *slog.Logger, fetch fetchWatch) *runWorker {
	var pub Publisher = LogPublisher{Logger: logger}
	if opts.Publisher != nil {
		pub = opts.Publisher
	}
	backoff := opts.RetryBackoff
	if backoff == nil {
		backoff = DefaultBackoff
	}
	logger = logger.With("component", "run_worker")
	webhook := opts.Webhook
	webhook.Metrics = opts.Metrics
	return &runWorker{
		db: opts.DB, runs: jobs.NewRunWriter(jobs.RunWriterOptions{DB: opts.DB}), webhook: NewWebhookClient(webhook), publisher: pub,
		announcer: jobs.NewAnnouncer(jobs.AnnouncerOptions{Publisher: pub, Metrics: opts.Metrics, Logger: logger}),
		rooms:     opts.Rooms, logger: logger, backoff: backoff, fetch: fetch,
	}
}
