package workers

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/startstop"
	"github.com/switchboard/switchboard/jobs"
)

// CoordinatorOptions configure a Coordinator; zero values mean defaults.
type CoordinatorOptions struct {
	// River is the replica's River client: working (Work) on a worker
	// replica, which also runs the claim loop; insert-only otherwise.
	River RiverOptions
	// Claim configures the claim loop of a worker replica. Its River is
	// the client above, its Lookout the Coordinator; its DB defaults to
	// River.Pool and its Logger to River.Logger.
	Claim jobs.ClaimerOptions
	// Listening reports whether the Notices are heard (the LISTEN
	// connection is up); nil: never, and the claim loop polls every
	// MaxSleep.
	Listening func() bool
	// Notices are the job queue's notices this replica hears (NewNotices);
	// nil: none.
	Notices *Notices
}

// Coordinator is a replica's end of the job queue: its River client and,
// on a worker replica, the claim loop that feeds it, built together by
// NewCoordinator and wired to each other, as River's NewClient builds its
// producers and notifier. It carries their conversation: the claim loop's
// looks tell River's parking whether work is near (Outlook), parking asks
// the loop to look (Look), the run worker's retries and snoozes reach both
// (FetchableAt), and the notices the replica hears wake them (Notices).
type Coordinator struct {
	river     *River
	claimer   *jobs.Claimer // nil on a web-only replica
	listening func() bool
	notices   *Notices
	base      startstop.Base
	// mu orders Start's starts before Stop's stops: a Stop racing a Start
	// stops what it started.
	mu sync.Mutex
}

// NewCoordinator builds the River client and, when opts.River.Work, the
// claim loop; Start runs them.
func NewCoordinator(opts CoordinatorOptions) (*Coordinator, error) {
	c := &Coordinator{listening: opts.Listening, notices: opts.Notices}
	r, err := newRiver(opts.River, c)
	if err != nil {
		return nil, err
	}
	c.river = r
	if !opts.River.Work {
		return c, nil
	}
	claim := opts.Claim
	claim.DB = cmp.Or[db.DB](claim.DB, opts.River.Pool)
	claim.Logger = cmp.Or(claim.Logger, opts.River.Logger)
	claim.River, claim.Pacing.Lookout = r.client, c
	c.claimer = jobs.NewClaimer(claim)
	r.look = c.claimer.Look
	return c, nil
}

// River is the replica's River client and its lifecycle (parking, drain).
func (c *Coordinator) River() *River { return c.river }

// Client is the River client, for inserting jobs and the River UI.
func (c *Coordinator) Client() *river.Client[pgx.Tx] { return c.river.client }

// Start starts River (working, on a worker replica), then the claim loop,
// so that claimed jobs find a running client here too, then answers the
// notices. A second Start is refused.
func (c *Coordinator) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	runCtx, err := c.base.Begin(ctx)
	if err != nil {
		return fmt.Errorf("start job queue: %w", err)
	}
	if err := c.river.Start(ctx); err != nil {
		return err
	}
	if c.claimer == nil {
		return nil
	}
	if err := c.claimer.Start(ctx); err != nil {
		c.river.Stop()
		return err
	}
	c.base.Go(func() { c.answer(runCtx) })
	return nil
}

// Stop stops the claim loop, then River (its running jobs finish within
// its StopTimeout).
func (c *Coordinator) Stop() {
	c.base.StopWith(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.claimer != nil {
			c.claimer.Stop()
		}
		c.river.Stop()
	})
}

// Drain stops this replica taking new work: the claim loop pauses (the
// other replicas claim the ticks) and River stops fetching jobs.
func (c *Coordinator) Drain() {
	if c.claimer != nil {
		c.claimer.SetPaused(true)
	}
	c.river.Drain()
}

// TasksChanged wakes this replica's claim loop (if it runs one): a task
// was created or changed here.
func (c *Coordinator) TasksChanged() {
	if c.claimer != nil {
		c.claimer.Wake()
	}
}

// Listening implements jobs.Lookout: whether the task notices are heard.
func (c *Coordinator) Listening() bool { return c.listening != nil && c.listening() }

// Outlook implements jobs.Lookout: River's parking hears what the claim
// loop's looks found (River.Outlook).
func (c *Coordinator) Outlook(o jobs.Outlook) time.Duration { return c.river.Outlook(o) }

// FetchableAt is the run worker's fetch watch: a retry or snooze makes a
// job of this replica fetchable at t. The claim loop has River's
// producers notified then, and parking keeps River running for it. Only a
// worker replica has a run worker, and a claim loop.
func (c *Coordinator) FetchableAt(t time.Time) {
	c.river.FetchableAt(t)
	c.claimer.FetchableAt(t)
}

// answer wakes the claim loop and River on the notices until ctx ends.
func (c *Coordinator) answer(ctx context.Context) {
	if c.notices == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.notices.tasks:
			c.claimer.Wake()
		case <-c.notices.inserts:
			c.river.Wake()
		}
	}
}
