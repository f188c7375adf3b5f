package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/jobs"
)

type runOutput struct {
	Body jobs.Run
}

type runListInput struct {
	IDPath
	Status string `query:"status" enum:"queued,running,succeeded,failed,cancelled" doc:"only runs with this status; failed: the dead-letter view"`
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"50" doc:"items per page (a page also stops at 1 MiB of items, so it may hold fewer: follow next_cursor)"`
	Cursor string `query:"cursor" maxLength:"200" doc:"next_cursor of the previous page"`
}

type runList struct {
	Items      []jobs.Run `json:"items"`
	NextCursor *string    `json:"next_cursor" doc:"null on the last page"`
}

type runListOutput struct {
	Body runList
}

type triggerBody struct {
	Payload        json.RawMessage `json:"payload,omitempty" doc:"this run's input: the webhook body, or the publish payload; at most 64 KiB; default the task's"`
	RunAt          *time.Time      `json:"run_at,omitempty" doc:"run at this time (at most 30 days ahead) instead of now"`
	IdempotencyKey string          `json:"idempotency_key,omitempty" maxLength:"255" doc:"the same key for the same task within 24 h answers the first run (200) instead of making another"`
	Priority       int             `json:"priority,omitempty" minimum:"1" maximum:"4" doc:"this run's priority, 1 (first) to 4 (last); default the task's"`
}

type triggerInput struct {
	IDPath
	Body *triggerBody `required:"false"`
}

type triggerOutput struct {
	Status int
	Body   jobs.Run
}

type ownerRunListInput struct {
	Status string `query:"status" enum:"queued,running,succeeded,failed,cancelled" doc:"only runs with this status; failed: the dead-letter view"`
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"50" doc:"items per page (a page also stops at 1 MiB of items, so it may hold fewer: follow next_cursor)"`
	Cursor string `query:"cursor" maxLength:"200" doc:"next_cursor of the previous page"`
}

type backfillInput struct {
	IDPath
	Body struct {
		From time.Time `json:"from" doc:"first instant of the range (inclusive)"`
		To   time.Time `json:"to" doc:"end of the range (exclusive), not in the future"`
	}
}

type backfillOutput struct {
	Body struct {
		Ticks   int        `json:"ticks" doc:"ticks of the schedule in the range"`
		Created int        `json:"created" doc:"runs made now; the other ticks had a run already"`
		Items   []jobs.Run `json:"items" doc:"the runs made now, oldest tick first"`
	}
}

type runIDInput struct {
	IDPath
}

// runActionInput names a run to act on; a malformed id is 422.
type runActionInput struct {
	IDPath
}

func registerRuns(api huma.API, s *Server) {
	tags := []string{"Runs"}
	huma.Register(api, huma.Operation{
		OperationID: "task-run-create", Method: http.MethodPost, Path: "/v1/tasks/{id}/runs",
		Summary: "Run a task now or later, with its own input", Tags: tags, Security: bearer, DefaultStatus: http.StatusAccepted,
		Description: "Creates a manual run, queued (202). With idempotency_key, a repeat within 24 h answers the first run (200). " +
			"409 when the task's overlap is skip and a run is queued or running.",
		MaxBodyBytes: 256 << 10,
		Errors:       []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
	}, s.triggerRun)
	huma.Register(api, huma.Operation{
		OperationID: "task-run-list", Method: http.MethodGet, Path: "/v1/tasks/{id}/runs",
		Summary: "List a task's runs, newest first", Tags: tags, Security: bearer,
		Description: "Scheduled, manual, retried and backfilled runs of the task, a page at a time (next_cursor).",
		Errors:      []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.listRuns)
	huma.Register(api, huma.Operation{
		OperationID: "run-get", Method: http.MethodGet, Path: "/v1/runs/{id}",
		Summary: "Get a run", Tags: tags, Security: bearer,
		Description: "The run's status, timing and last outcome; its attempts are at /v1/runs/{id}/attempts.",
		Errors:      []int{http.StatusUnauthorized, http.StatusNotFound},
	}, s.getRun)
	huma.Register(api, huma.Operation{
		OperationID: "run-cancel", Method: http.MethodPost, Path: "/v1/runs/{id}/cancel",
		Summary: "Cancel a queued or running run", Tags: tags, Security: bearer,
		Description: "A queued or delayed run never starts; a running webhook call is aborted. 200 with the run, status cancelled, " +
			"also when it already was; 409 when it succeeded or failed.",
		Errors: []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
	}, s.cancelRun)
	huma.Register(api, huma.Operation{
		OperationID: "run-attempt-list", Method: http.MethodGet, Path: "/v1/runs/{id}/attempts",
		Summary: "List every attempt of a run", Tags: tags, Security: bearer,
		Description: "Start, end, status, http_status, error, response excerpt and duration of each attempt. " +
			"While the run is queued between attempts, the run's next_attempt_at says when the next is due.",
		Errors: []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.listAttempts)
	huma.Register(api, huma.Operation{
		OperationID: "run-retry", Method: http.MethodPost, Path: "/v1/runs/{id}/retry",
		Summary: "Retry a failed or cancelled run", Tags: tags, Security: bearer, DefaultStatus: http.StatusAccepted,
		Description: "Starts a new manual run with the same input, retry_of the original (202). A run is retried once: " +
			"asking again within 24 h answers that retry (200). 409 when the run did not fail and was not cancelled, " +
			"or the task's overlap is skip and a run is active.",
		Errors: []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
	}, s.retryRun)
	huma.Register(api, huma.Operation{
		OperationID: "task-backfill", Method: http.MethodPost, Path: "/v1/tasks/{id}/backfill",
		Summary: "Run the ticks of a past range", Tags: tags, Security: bearer, DefaultStatus: http.StatusAccepted,
		Description: "One scheduled run per tick of the task's schedule in [from, to), in its time zone; a tick that has a run " +
			"already (claimed or backfilled) is not run again. At most 1000 ticks and 366 days, from within the last 366 days, " +
			"to not in the future; a range that holds no tick is 422.",
		Errors: []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.backfill)
	huma.Register(api, huma.Operation{
		OperationID: "run-list", Method: http.MethodGet, Path: "/v1/runs",
		Summary: "List the runs of all your tasks, newest first", Tags: tags, Security: bearer,
		Description: "With status=failed: the dead-letter view, every failed run to inspect or retry.",
		Errors:      []int{http.StatusUnauthorized, http.StatusUnprocessableEntity},
	}, s.listOwnerRuns)
	registerRunBatch(api, s)
}

type attemptListOutput struct {
	Body struct {
		Items []jobs.Attempt `json:"items" doc:"every attempt, first first"`
	}
}

func (s *Server) listAttempts(ctx context.Context, in *runActionInput) (*attemptListOutput, error) {
	items, err := jobs.ListAttempts(ctx, s.opts.Pool, principal(ctx).ProjectID, in.ID)
	if err != nil {
		return nil, s.fail(ctx, err, "no such run", "")
	}
	out := &attemptListOutput{}
	out.Body.Items = items
	return out, nil
}

func (s *Server) backfill(ctx context.Context, in *backfillInput) (*backfillOutput, error) {
	if s.opts.River == nil {
		return nil, s.fail(ctx, errors.New("no river client wired for backfills"), "", "")
	}
	res, err := jobs.Backfill(ctx, s.opts.Pool, s.opts.River, s.opts.Quotas, principal(ctx).ProjectID, in.ID, in.Body.From, in.Body.To)
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	s.announce(ctx, res.Created...)
	out := &backfillOutput{}
	out.Body.Ticks, out.Body.Created, out.Body.Items = res.Ticks, len(res.Created), res.Created
	return out, nil
}

func (s *Server) listOwnerRuns(ctx context.Context, in *ownerRunListInput) (*runListOutput, error) {
	items, next, err := jobs.ListRunsWhere(ctx, s.opts.Pool, principal(ctx).ProjectID, jobs.RunFilter{Status: in.Status},
		jobs.Page{Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	return &runListOutput{Body: runList{Items: items, NextCursor: nilIfEmpty(next)}}, nil
}

func (s *Server) retryRun(ctx context.Context, in *runActionInput) (*triggerOutput, error) {
	if s.opts.River == nil {
		return nil, s.fail(ctx, errors.New("no river client wired for retrying runs"), "", "")
	}
	res, err := jobs.RetryRun(ctx, s.opts.Pool, s.opts.River, s.opts.Quotas, principal(ctx).ProjectID, in.ID)
	switch {
	case errors.Is(err, jobs.ErrRunNotRetryable):
		return nil, huma.Error409Conflict("only a failed or cancelled run can be retried")
	case errors.Is(err, db.ErrNotFound):
		return nil, huma.Error404NotFound("no such run")
	case err != nil:
		return nil, s.taskError(ctx, err)
	case res.Replayed:
		return &triggerOutput{Status: http.StatusOK, Body: res.Run}, nil
	}
	s.announce(ctx, res.Run)
	return &triggerOutput{Status: http.StatusAccepted, Body: res.Run}, nil
}

func (s *Server) cancelRun(ctx context.Context, in *runActionInput) (*runOutput, error) {
	if s.opts.River == nil {
		return nil, s.fail(ctx, errors.New("no river client wired for cancelling runs"), "", "")
	}
	res, err := jobs.CancelRun(ctx, s.opts.Pool, s.opts.River, principal(ctx).ProjectID, in.ID)
	if err != nil {
		return nil, s.fail(ctx, err, "no such run", "the run has already finished; retry it instead")
	}
	if res.Changed {
		s.announce(ctx, res.Run)
	}
	return &runOutput{Body: res.Run}, nil
}

func (s *Server) triggerRun(ctx context.Context, in *triggerInput) (*triggerOutput, error) {
	if s.opts.River == nil {
		return nil, s.fail(ctx, errors.New("no river client wired for manual runs"), "", "")
	}
	req := jobs.TriggerRequest{ProjectID: principal(ctx).ProjectID, TaskID: in.ID}
	if b := in.Body; b != nil {
		req.Payload, req.RunAt, req.IdempotencyKey, req.Priority = b.Payload, b.RunAt, b.IdempotencyKey, b.Priority
	}
	res, err := jobs.Trigger(ctx, s.opts.Pool, s.opts.River, s.opts.Quotas, req)
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	if res.Replayed {
		return &triggerOutput{Status: http.StatusOK, Body: res.Run}, nil
	}
	s.announce(ctx, res.Cancelled...) // before the run that replaces them
	s.announce(ctx, res.Run)
	return &triggerOutput{Status: http.StatusAccepted, Body: res.Run}, nil
}

// announce announces the runs' new status to the caller, their owner.
func (s *Server) announce(ctx context.Context, runs ...jobs.Run) {
	owned := make([]jobs.OwnedRun, len(runs))
	for i, r := range runs {
		owned[i] = jobs.OwnedRun{Run: r, ProjectID: principal(ctx).ProjectID}
	}
	s.opts.RunAnnouncer.Announce(context.WithoutCancel(ctx), owned...)
}

func (s *Server) listRuns(ctx context.Context, in *runListInput) (*runListOutput, error) {
	items, next, err := jobs.ListRunsWhere(ctx, s.opts.Pool, principal(ctx).ProjectID, jobs.RunFilter{TaskID: in.ID, Status: in.Status},
		jobs.Page{Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	return &runListOutput{Body: runList{Items: items, NextCursor: nilIfEmpty(next)}}, nil
}

func (s *Server) getRun(ctx context.Context, in *runIDInput) (*runOutput, error) {
	run, err := jobs.GetRun(ctx, s.opts.Pool, principal(ctx).ProjectID, in.ID)
	if err != nil {
		return nil, s.fail(ctx, err, "no such run", "")
	}
	return &runOutput{Body: run}, nil
}
