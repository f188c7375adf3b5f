package workers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard/switchboard/infra/logging"
	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/jobs"
)

// RiverOptions configure a replica's River client; zero values mean
// defaults.
type RiverOptions struct {
	Pool *pgxpool.Pool
	// ListenPool, when set, supplies the session connection River's
	// notifier LISTENs on (Pool is a transaction-mode pooler).
	ListenPool *pgxpool.Pool
	// PollOnly: River does not LISTEN (a transaction-mode pooler and no
	// ListenPool): new jobs, leadership and queue changes are noticed by
	// polling (FetchPollInterval, 1 s by default) instead of at once.
	PollOnly bool
	Logger   *slog.Logger
	// ClientID names this process in River (its cluster node id).
	ClientID string
	// Work makes the client work jobs with Workers (worker replicas);
	// without it the client only inserts (web-only replicas).
	Work    bool
	Workers Options
	// TracerProvider traces inserts and worked jobs (riverMiddleware);
	// nil, tracing off, installs nothing.
	TracerProvider trace.TracerProvider
	// StopTimeout is how long Stop lets running jobs finish before it
	// cancels them; default 25 s.
	StopTimeout time.Duration
	// Park stops a working client while nothing is due and starts it
	// again when work appears (park.go); never when PollOnly.
	Park ParkOptions
	// FetchPollInterval is how often a working client polls for jobs
	// nobody announced; default River's (1 s).
	FetchPollInterval time.Duration
}

// River is a replica's River client and its lifecycle: Start works jobs
// (worker replicas), Drain stops taking new ones while running ones finish
// (a draining node), Stop ends it, whether or not a drain began.
type River struct {
	client      *river.Client[pgx.Tx]
	work        bool
	logger      *slog.Logger
	stopTimeout time.Duration
	base        startstop.Base

	// Parking (park.go): act is nil when the client never parks.
	park           ParkOptions
	act            *activity
	look           func() // the claim loop's Look (Coordinator); nil: none
	wakeCh, parkCh chan struct{}
	replanCh       chan struct{}               // workAt moved earlier
	workAt         atomic.Int64                // unix ns of the earliest retry or snooze of this replica's jobs (FetchableAt)
	ping           func(context.Context) error // the database, before a start
	parks          atomic.Int64                // times parked

	mu       sync.Mutex
	stopping bool               // Stop began: no drain starts any more
	cancel   context.CancelFunc // of the drain's soft stop
	drained  chan struct{}      // closed when the drain's soft stop returned
	parked   atomic.Bool        // the client stopped (or is stopping) while idle (park.go); set under mu
}

// NewRiver builds the client: a working one when opts.Work, an insert-only
// one otherwise. A replica builds it with its claim loop (NewCoordinator).
func NewRiver(opts RiverOptions) (*River, error) { return newRiver(opts, nil) }

// newRiver is NewRiver whose run worker tells fetch when a retry or snooze
// makes its job fetchable again; nil: parking (when it parks) alone.
func newRiver(opts RiverOptions, fetch fetchWatch) (*River, error) {
	logger := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	r := &River{work: opts.Work, logger: logger, stopTimeout: cmp.Or(opts.StopTimeout, 25*time.Second),
		park: opts.Park, wakeCh: make(chan struct{}, 1), parkCh: make(chan struct{}, 1), replanCh: make(chan struct{}, 1),
		ping: opts.Pool.Ping}
	if opts.Work && !opts.PollOnly && opts.Park.After > 0 {
		r.act = &activity{}
		r.act.touch()
	}
	// A web-only client inserts delayed runs too (jobs.Trigger): they go
	// in available at run_at, like the worker's (RiverConfig).
	cfg := &river.Config{ID: opts.ClientID, Logger: logging.Demoted(logger).With("component", "river"),
		Middleware: []rivertype.Middleware{&jobs.InsertAvailable{}}}
	if opts.Work {
		wopts := opts.Workers
		wopts.ClientID, wopts.Logger = cmp.Or(wopts.ClientID, opts.ClientID), cmp.Or(wopts.Logger, logger)
		if fetch == nil && r.act != nil {
			fetch = r // a retry or snooze of this replica keeps River running for it
		}
		var err error
		if cfg, err = riverConfig(wopts, fetch); err != nil {
			return nil, fmt.Errorf("river config: %w", err)
		}
		cfg.FetchPollInterval = opts.FetchPollInterval
	}
	cfg.Middleware = append(cfg.Middleware, riverMiddleware(opts.TracerProvider)...)
	if r.act != nil {
		cfg.Middleware = append(cfg.Middleware, r.act)
	}
	driver := riverDriver(opts.Pool, opts.ListenPool)
	if opts.Work {
		share := newFairShare(cmp.Or(opts.Workers.MaxWorkers, DefaultMaxWorkers), fetch)
		cfg.Middleware = append(cfg.Middleware, share)
		driver = &fairDriver{Driver: driver, pool: opts.Pool, share: share}
	}
	cfg.PollOnly = opts.PollOnly
	client, err := river.NewClient(driver, cfg)
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	r.client = client
	return r, nil
}

// Client is the River client, for inserting jobs and the River UI.
func (r *River) Client() *river.Client[pgx.Tx] { return r.client }

// Start starts working jobs on a worker replica (an insert-only client
// has nothing to start). A second Start is refused.
func (r *River) Start(ctx context.Context) error {
	runCtx, err := r.base.Begin(ctx)
	if err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	if !r.work {
		return nil
	}
	// River's own context: jobs must not die with the caller's.
	if err := r.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	if r.act != nil {
		r.base.Go(func() { r.parkLoop(runCtx) })
	}
	return nil
}

// Drain stops River fetching jobs on this node; running jobs finish. (A
// queue pause would be cluster-wide, so the client stops.) Idempotent; a
// no-op before Start and once Stop began.
func (r *River) Drain() {
	if !r.work || !r.base.Started() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping || r.drained != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.drained = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		if err := r.client.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
			r.logger.Warn("river stop while draining", "error", err)
		}
	}(r.drained)
}

// Stop lets running jobs finish for StopTimeout, then cancels them (5 s
// more for them to return). A drain's soft stop is taken over: it is
// cancelled, and River lets this Stop begin with its own deadline.
func (r *River) Stop() {
	r.base.StopWith(func() {
		r.endDrain()
		if !r.work {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.stopTimeout)
		defer cancel()
		if err := r.client.Stop(ctx); err != nil {
			r.logger.Warn("river did not finish running jobs in time; cancelling them", "error", err)
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer ccancel()
			_ = r.client.StopAndCancel(cctx)
		}
	})
}

// endDrain cancels a drain's soft stop, waits for it, and lets none start.
func (r *River) endDrain() {
	r.mu.Lock()
	r.stopping = true
	cancel, done := r.cancel, r.drained
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
