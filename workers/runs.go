package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/jobs"
)

// runWorker performs task runs: it marks the run running, performs the
// action, records the outcome and publishes every status change to the
// task's owner. River retries failed attempts up to the task's max_attempts.
type runWorker struct {
	river.WorkerDefaults[jobs.RunArgs]
	db        db.DB
	runs      *jobs.RunWriter // batched StartRun and FinishAttempt
	webhook   *WebhookClient
	publisher Publisher       // publish actions
	announcer *jobs.Announcer // the run's status changes
	rooms     RoomAccess      // nil: every room is open
	logger    *slog.Logger
	backoff   func(attempt int) time.Duration
	fetch     fetchWatch // nil: retries and snoozes wait for River's poll

	// retryAt passes a retry time (Retry-After or backoff) from Work to
	// NextRetry, which River calls right after Work on the same node.
	retryAt sync.Map // job id → time.Time
}

// DefaultBackoff waits attempt⁴ seconds (1s, 16s, 81s, 4m16s, ...) with
// ±10% jitter, at most a day.
func DefaultBackoff(attempt int) time.Duration {
	d := time.Duration(math.Pow(float64(attempt), 4)) * time.Second
	d = min(d, 24*time.Hour)
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}

// SlotWait is how long a run that found no free slot (overlap buffer_one
// or cancel_other, or max_concurrency) waits before it looks again.
const SlotWait = 500 * time.Millisecond

// snoozeMargin: a snoozed job is told fetchable this long after
// SlotWait, since River reckons the snooze from a moment after Work
// returns (its scheduled_at must have passed when the producers fetch).
const snoozeMargin = 20 * time.Millisecond

// fetchWatch is told when a run's retry or snooze makes its job fetchable
// again (the Coordinator: the claim loop notifies River's producers then,
// and a parked River starts in time).
type fetchWatch interface {
	FetchableAt(t time.Time)
}

// fetchableAt tells the fetch watch that the job becomes fetchable at t.
func (w *runWorker) fetchableAt(t time.Time) {
	if w.fetch != nil {
		w.fetch.FetchableAt(t)
	}
}

// RunJobTimeout is River's timeout of a task-run job: room for the longest
// task timeout; the worker enforces the task's own timeout_seconds on each
// attempt.
const RunJobTimeout = jobs.MaxTimeoutSeconds*time.Second + time.Minute

// RecordRetryFor is how long a worker keeps trying to record a run's start
// or an attempt's outcome while the database is unreachable (a failover, a
// pooler refusing logins, a restart): both writes are idempotent, and an
// outcome given up on leaves the run running until River rescues its job.
// A stopping worker (its job's context done) tries once.
const RecordRetryFor = time.Minute

// Timeout is RunJobTimeout.
func (w *runWorker) Timeout(*river.Job[jobs.RunArgs]) time.Duration { return RunJobTimeout }

// NextRetry honours a Retry-After the target sent, or the backoff.
func (w *runWorker) NextRetry(job *river.Job[jobs.RunArgs]) time.Time {
	if v, ok := w.retryAt.LoadAndDelete(job.ID); ok {
		return v.(time.Time)
	}
	return time.Now().Add(w.backoff(job.Attempt))
}

// attempt is what one try of the action produced.
type attempt struct {
	httpStatus int
	excerpt    string
	output     json.RawMessage
	truncated  bool // output is cut to the limit
	err        error
	retryable  bool
	gone       bool
	retryAfter time.Duration
}

func (w *runWorker) Work(ctx context.Context, job *river.Job[jobs.RunArgs]) error {
	var rc jobs.RunContext
	err := db.RetryTransient(ctx, RecordRetryFor, func() (err error) {
		rc, err = w.runs.StartRun(ctx, job.Args.RunID, job.Attempt)
		return err
	})
	if errors.Is(err, db.ErrNotFound) {
		return nil // task deleted or run already finished: nothing to do
	}
	if errors.Is(err, jobs.ErrNoSlot) {
		// Wait without spending an attempt: a snooze keeps job.Attempt.
		w.fetchableAt(time.Now().Add(SlotWait + snoozeMargin))
		return river.JobSnooze(SlotWait)
	}
	if err != nil {
		return fmt.Errorf("start run: %w", err)
	}
	w.announce(ctx, jobs.OwnedRun{Run: rc.Run, ProjectID: rc.Task.ProjectID})

	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, time.Duration(rc.Task.TimeoutSeconds)*time.Second)
	a := w.perform(actx, rc)
	timedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
	cancel()
	if errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely) {
		// Cancelled through the API, which marked the run: River finalises
		// the job as cancelled; the aborted call is all there is to record.
		return context.Cause(ctx)
	}
	if ctx.Err() != nil {
		// Stopping: River puts the job back; so do we.
		a = attempt{err: errors.New("interrupted: the worker stopped; the run will be retried")}
		w.finish(ctx, rc, jobs.Outcome{Status: jobs.StatusQueued, Attempt: rc.Run.Attempt, Error: a.err.Error(),
			Duration: time.Since(start), Interrupted: true})
		return ctx.Err()
	}
	if timedOut && a.err != nil {
		a = attempt{err: fmt.Errorf("timed out after %ds", rc.Task.TimeoutSeconds), retryable: true}
	}
	return w.conclude(ctx, job, rc, a, time.Since(start))
}

// conclude records the attempt and tells River what follows.
func (w *runWorker) conclude(ctx context.Context, job *river.Job[jobs.RunArgs], rc jobs.RunContext, a attempt, took time.Duration) error {
	o := jobs.Outcome{HTTPStatus: a.httpStatus, Excerpt: a.excerpt, Duration: took, Status: jobs.StatusSucceeded, Attempt: rc.Run.Attempt,
		Output: a.output, OutputTruncated: a.truncated}
	if a.err == nil {
		w.finish(ctx, rc, o)
		return nil
	}
	o.Error = a.err.Error()
	switch {
	case a.gone:
		o.Status = jobs.StatusFailed
		if err := jobs.DeactivateTask(context.WithoutCancel(ctx), w.db, rc.Task.ID); err != nil {
			return err
		}
		w.finish(ctx, rc, o)
		return river.JobCancel(a.err)
	case !a.retryable:
		o.Status = jobs.StatusFailed
		w.finish(ctx, rc, o)
		return river.JobCancel(a.err)
	case job.Attempt >= job.MaxAttempts:
		o.Status = jobs.StatusFailed
		w.finish(ctx, rc, o)
		return a.err
	}
	o.Status = jobs.StatusQueued
	next := time.Now().Add(max(w.backoff(job.Attempt), a.retryAfter))
	o.NextAttemptAt = &next
	w.retryAt.Store(job.ID, next)
	if !w.finish(ctx, rc, o) {
		// Cancelled (or deleted) during the attempt: no retry.
		w.retryAt.Delete(job.ID)
		return river.JobCancel(a.err)
	}
	w.fetchableAt(next) // NextRetry gives River this very time
	return a.err
}

// finish records the outcome and announces the new status. false: the run
// was cancelled or deleted meanwhile, and nothing was recorded.
func (w *runWorker) finish(ctx context.Context, rc jobs.RunContext, o jobs.Outcome) bool {
	if rc.Run.StartedAt != nil {
		o.StartedAt = *rc.Run.StartedAt
	}
	var run jobs.Run
	err := db.RetryTransient(ctx, RecordRetryFor, func() (err error) {
		run, err = w.runs.FinishAttempt(context.WithoutCancel(ctx), rc.Run.ID, o)
		return err
	})
	if errors.Is(err, db.ErrNotFound) {
		return false
	}
	if err != nil {
		w.logger.ErrorContext(ctx, "record run outcome", "run_id", rc.Run.ID, "error", err)
		return true
	}
	w.logger.DebugContext(ctx, "run attempt recorded", "run_id", run.ID, "status", run.Status, "attempt", run.Attempt)
	w.announce(ctx, jobs.OwnedRun{Run: run, ProjectID: rc.Task.ProjectID, Ended: &jobs.EndedAttempt{Action: rc.Task.Action.Type, Outcome: o}})
	return true
}

// announce announces the run's new status to its project.
func (w *runWorker) announce(ctx context.Context, r jobs.OwnedRun) {
	w.announcer.Announce(context.WithoutCancel(ctx), r)
}

func (w *runWorker) perform(ctx context.Context, rc jobs.RunContext) attempt {
	switch rc.Task.Action.Type {
	case jobs.ActionWebhook:
		return w.callWebhook(ctx, rc)
	case jobs.ActionPublish:
		return w.publish(ctx, rc)
	}
	return attempt{err: fmt.Errorf("unknown action type %q", rc.Task.Action.Type)}
}

func (w *runWorker) publish(ctx context.Context, rc jobs.RunContext) attempt {
	a := rc.Task.Action
	var payload any
	switch {
	case len(rc.Run.Payload) > 0:
		payload = rc.Run.Payload
	case len(a.Payload) > 0:
		payload = a.Payload
	}
	var err error
	if a.Room != "" {
		if refused := w.checkRoom(ctx, rc.Task.OwnerID, a.Room); refused != nil {
			return *refused
		}
		err = w.publisher.PublishRoom(ctx, a.Room, a.Event, payload)
	} else {
		err = w.publisher.PublishUser(ctx, rc.Task.OwnerID, a.Event, payload)
	}
	if err != nil {
		return attempt{err: fmt.Errorf("publish %s: %w", a.Event, err), retryable: true}
	}
	return attempt{}
}

func (w *runWorker) callWebhook(ctx context.Context, rc jobs.RunContext) attempt {
	a := rc.Task.Action
	headers := map[string]string{
		"X-Switchboard-Task-Id":       rc.Task.ID,
		"X-Switchboard-Run-Id":        rc.Run.ID,
		"X-Switchboard-Scheduled-For": rc.Run.ScheduledFor.UTC().Format(time.RFC3339Nano),
		"X-Switchboard-Attempt":       fmt.Sprint(rc.Run.Attempt),
	}
	for k, v := range a.Headers {
		headers[k] = v
	}
	res, err := w.webhook.Send(ctx, WebhookRequest{
		URL: a.URL, Method: a.Method, Headers: headers, Body: webhookBody(rc),
		MsgID: rc.Run.ID, Secret: rc.SigningSecret, PreviousSecret: rc.PreviousSigningSecret,
	})
	if err != nil {
		if errors.Is(err, jobs.ErrBlockedTarget) {
			return attempt{err: err}
		}
		return attempt{err: fmt.Errorf("webhook: %w", err), retryable: true}
	}
	out := attempt{httpStatus: res.Status, excerpt: res.Excerpt, retryAfter: res.RetryAfter, output: res.Output, truncated: res.OutputTruncated}
	switch {
	case res.Status >= 200 && res.Status < 300:
	case res.Status == http.StatusGone:
		out.err, out.gone = errors.New("webhook answered 410 Gone: the task is now inactive"), true
	case res.Status == http.StatusRequestTimeout || res.Status == http.StatusTooEarly ||
		res.Status == http.StatusTooManyRequests || res.Status >= 500:
		out.err, out.retryable = fmt.Errorf("webhook answered %d", res.Status), true
	default:
		out.err = fmt.Errorf("webhook answered %d; not retried", res.Status)
	}
	return out
}

// webhookBody is the run's payload, the action's body as given, or a
// description of the run.
func webhookBody(rc jobs.RunContext) []byte {
	if len(rc.Run.Payload) > 0 {
		return rc.Run.Payload
	}
	if len(rc.Task.Action.Body) > 0 {
		return rc.Task.Action.Body
	}
	b, _ := json.Marshal(map[string]any{
		"type": "task.run", "task_id": rc.Task.ID, "task_name": rc.Task.Name, "run_id": rc.Run.ID,
		"trigger": rc.Run.Trigger, "scheduled_for": rc.Run.ScheduledFor.UTC(),
	})
	return b
}
