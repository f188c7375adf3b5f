package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/jobs"
)

type runOutput struct {
	Body jobs.Run
}

type runListInput struct {
	IDPath
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"50" doc:"items per page"`
	Cursor string `query:"cursor" maxLength:"200" doc:"next_cursor of the previous page"`
}

type runList struct {
	Items      []jobs.Run `json:"items"`
	NextCursor *string    `json:"next_cursor" doc:"null on the last page"`
}

type runListOutput struct {
	Body runList
}

type runIDInput struct {
	IDPath
}

func registerRuns(api huma.API, s *Server) {
	tags := []string{"Runs"}
	huma.Register(api, huma.Operation{
		OperationID: "task-run-create", Method: http.MethodPost, Path: "/v1/tasks/{id}/runs",
		Summary: "Run a task now", Tags: tags, Security: bearer, DefaultStatus: http.StatusAccepted,
		Description: "Creates a manual run, queued. 409 when the task's overlap is skip and a run is queued or running.",
		Errors:      []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict},
	}, s.triggerRun)
	huma.Register(api, huma.Operation{
		OperationID: "task-run-list", Method: http.MethodGet, Path: "/v1/tasks/{id}/runs",
		Summary: "List a task's runs, newest first", Tags: tags, Security: bearer,
		Errors: []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.listRuns)
	huma.Register(api, huma.Operation{
		OperationID: "run-get", Method: http.MethodGet, Path: "/v1/runs/{id}",
		Summary: "Get a run", Tags: tags, Security: bearer,
		Errors: []int{http.StatusUnauthorized, http.StatusNotFound},
	}, s.getRun)
}

func (s *Server) triggerRun(ctx context.Context, in *taskIDInput) (*runOutput, error) {
	if s.opts.River == nil {
		return nil, s.fail(ctx, errors.New("no river client wired for manual runs"), "", "")
	}
	run, err := jobs.TriggerRun(ctx, s.opts.Pool, s.opts.River, principal(ctx).UserID, in.ID)
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	s.opts.JobMetrics.RunStatus(run.Status, 1)
	if s.opts.RunEvents != nil {
		if err := s.opts.RunEvents.PublishUser(context.WithoutCancel(ctx), principal(ctx).UserID, jobs.EventName(run.Status), run); err != nil {
			s.opts.Logger.WarnContext(ctx, "publish run event", "run_id", run.ID, "error", err)
		}
	}
	return &runOutput{Body: run}, nil
}

func (s *Server) listRuns(ctx context.Context, in *runListInput) (*runListOutput, error) {
	items, next, err := jobs.ListRuns(ctx, s.opts.Pool, principal(ctx).UserID, in.ID, jobs.Page{Limit: in.Limit, Cursor: in.Cursor})
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	return &runListOutput{Body: runList{Items: items, NextCursor: nilIfEmpty(next)}}, nil
}

func (s *Server) getRun(ctx context.Context, in *runIDInput) (*runOutput, error) {
	run, err := jobs.GetRun(ctx, s.opts.Pool, principal(ctx).UserID, in.ID)
	if err != nil {
		return nil, s.fail(ctx, err, "no such run", "")
	}
	return &runOutput{Body: run}, nil
}
