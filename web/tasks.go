package web

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/jobs"
)

type taskCreateBody struct {
	Name           string      `json:"name" minLength:"1" maxLength:"200"`
	Schedule       *string     `json:"schedule,omitempty" nullable:"true" maxLength:"200" doc:"5-field cron, 6-field cron with leading seconds, a descriptor such as @hourly, or @every <duration> (at least 1s); omitted or null: an on-demand task, run only when triggered" example:"*/5 * * * *"`
	Timezone       string      `json:"timezone,omitempty" maxLength:"64" doc:"IANA zone the schedule is read in; default UTC" example:"Europe/Paris"`
	Action         jobs.Action `json:"action"`
	Active         *bool       `json:"active,omitempty" doc:"default true"`
	Overlap        string      `json:"overlap,omitempty" enum:"skip,allow,buffer_one,cancel_other" doc:"skip (default): no new run while one is queued or running; allow: runs overlap (see max_concurrency); buffer_one: one run waits behind the running one, further ticks are skipped; cancel_other: a new run cancels the active one"`
	MaxConcurrency *int        `json:"max_concurrency,omitempty" minimum:"1" maximum:"100" doc:"with overlap allow: at most this many running at once across all workers; the rest wait in order"`
	MaxAttempts    int         `json:"max_attempts,omitempty" minimum:"1" maximum:"25" doc:"tries per run, default 3"`
	TimeoutSeconds int         `json:"timeout_seconds,omitempty" minimum:"1" maximum:"600" doc:"per attempt, default 30"`
	Priority       int         `json:"priority,omitempty" minimum:"1" maximum:"4" doc:"its runs' priority, 1 (first, default) to 4 (last): when workers are busy, runs of priority 1 start before waiting runs of 2, and so on"`
}

type taskPatchBody struct {
	Name           *string        `json:"name,omitempty" minLength:"1" maxLength:"200"`
	Schedule       nullableString `json:"schedule,omitempty" doc:"null makes the task on-demand"`
	Timezone       *string        `json:"timezone,omitempty" maxLength:"64"`
	Action         *jobs.Action   `json:"action,omitempty"`
	Active         *bool          `json:"active,omitempty"`
	Overlap        *string        `json:"overlap,omitempty" enum:"skip,allow,buffer_one,cancel_other"`
	MaxConcurrency nullableInt    `json:"max_concurrency,omitempty" doc:"null removes the limit"`
	MaxAttempts    *int           `json:"max_attempts,omitempty" minimum:"1" maximum:"25"`
	TimeoutSeconds *int           `json:"timeout_seconds,omitempty" minimum:"1" maximum:"600"`
	Priority       *int           `json:"priority,omitempty" minimum:"1" maximum:"4" doc:"for runs made from now on"`
}

type taskCreateInput struct {
	Body taskCreateBody
}

type taskPatchInput struct {
	IDPath
	Body taskPatchBody
}

type taskIDInput struct {
	IDPath
}

type rotateSecretBody struct {
	PreviousExpiresAt *time.Time `json:"previous_expires_at,omitempty" doc:"until when the replaced secret still signs beside the new one (at most 30 days ahead); default 24 h from now; a time already past stops it at once"`
}

type rotateSecretInput struct {
	IDPath
	Body *rotateSecretBody `required:"false"`
}

type taskListInput struct {
	Kind   string `query:"kind" enum:"scheduled,on_demand" doc:"only tasks with a schedule, or only on-demand ones"`
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"50" doc:"items per page (a page also stops at 1 MiB of items, so it may hold fewer: follow next_cursor)"`
	Cursor string `query:"cursor" maxLength:"200" doc:"next_cursor of the previous page"`
}

type taskOutput struct {
	Body jobs.Task
}

type taskList struct {
	Items      []jobs.Task `json:"items"`
	NextCursor *string     `json:"next_cursor" doc:"null on the last page"`
}

type taskListOutput struct {
	Body taskList
}

// maxTaskBody bounds a task's body: at most 64 KiB of action body or
// payload, a URL and 50 headers, with room to spare. Parsing and validating
// cost in proportion to the body; this bounds them per request.
const maxTaskBody = 256 << 10

func registerTasks(api huma.API, s *Server) {
	tags := []string{"Tasks"}
	huma.Register(api, huma.Operation{
		OperationID: "task-create", Method: http.MethodPost, Path: "/v1/tasks",
		Summary: "Create a task", Tags: tags, Security: bearer, DefaultStatus: http.StatusCreated, MaxBodyBytes: maxTaskBody,
		Description: "The response carries the task's signing_secret (whsec_…) once; webhook calls are signed with it per the Standard Webhooks spec.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusUnprocessableEntity},
	}, s.createTask)
	huma.Register(api, huma.Operation{
		OperationID: "task-list", Method: http.MethodGet, Path: "/v1/tasks",
		Summary: "List your tasks, newest first", Tags: tags, Security: bearer,
		Description: "A page of your tasks (next_cursor for the next); kind keeps only scheduled or only on-demand ones.",
		Errors:      []int{http.StatusUnauthorized, http.StatusUnprocessableEntity},
	}, s.listTasks)
	huma.Register(api, huma.Operation{
		OperationID: "task-get", Method: http.MethodGet, Path: "/v1/tasks/{id}",
		Summary: "Get a task", Tags: tags, Security: bearer,
		Description: "One of your tasks; another account's task is a 404. The signing secret is not shown again.",
		Errors:      []int{http.StatusUnauthorized, http.StatusNotFound},
	}, s.getTask)
	huma.Register(api, huma.Operation{
		OperationID: "task-update", Method: http.MethodPatch, Path: "/v1/tasks/{id}",
		Summary: "Change some fields of a task", Tags: tags, Security: bearer, MaxBodyBytes: maxTaskBody,
		Description: "Changing schedule, timezone or active recomputes next_run_at.",
		Errors:      []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.updateTask)
	huma.Register(api, huma.Operation{
		OperationID: "task-delete", Method: http.MethodDelete, Path: "/v1/tasks/{id}",
		Summary: "Delete a task and its runs", Tags: tags, Security: bearer, DefaultStatus: http.StatusNoContent,
		Description: "Removes the task and its runs; queued runs never start.",
		Errors:      []int{http.StatusUnauthorized, http.StatusNotFound},
	}, s.deleteTask)
	huma.Register(api, huma.Operation{
		OperationID: "task-rotate-secret", Method: http.MethodPost, Path: "/v1/tasks/{id}/rotate-secret",
		Summary: "Rotate a task's signing secret", Tags: tags, Security: bearer, MaxBodyBytes: 1 << 10,
		Description: "Gives the task a new signing_secret, returned once in this answer. Until previous_expires_at (default 24 h) " +
			"webhook calls carry a signature with the replaced secret beside the new one, so receivers verify with either while they switch.",
		Errors: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity},
	}, s.rotateSecret)
}

func (s *Server) createTask(ctx context.Context, in *taskCreateInput) (*taskOutput, error) {
	b := in.Body
	t := jobs.Task{
		OwnerID: principal(ctx).UserID, ProjectID: principal(ctx).ProjectID, Name: b.Name, Schedule: b.Schedule, Timezone: b.Timezone,
		Action: b.Action, Active: b.Active == nil || *b.Active, Overlap: b.Overlap, MaxConcurrency: b.MaxConcurrency,
		MaxAttempts: b.MaxAttempts, TimeoutSeconds: b.TimeoutSeconds, Priority: b.Priority,
	}
	if err := t.Normalize(s.opts.WebhookAllowPrivate); err != nil {
		return nil, s.taskError(ctx, err)
	}
	if err := s.requirePublishRoom(ctx, &t.Action); err != nil {
		return nil, err
	}
	out, err := jobs.CreateTask(ctx, s.opts.Pool, s.opts.Quotas, t)
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	s.tasksChanged()
	return &taskOutput{Body: out}, nil
}

func (s *Server) listTasks(ctx context.Context, in *taskListInput) (*taskListOutput, error) {
	items, next, err := jobs.ListTasks(ctx, s.opts.Pool, principal(ctx).ProjectID, jobs.Page{Limit: in.Limit, Cursor: in.Cursor}, in.Kind)
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	return &taskListOutput{Body: taskList{Items: items, NextCursor: nilIfEmpty(next)}}, nil
}

func (s *Server) getTask(ctx context.Context, in *taskIDInput) (*taskOutput, error) {
	t, err := jobs.GetTask(ctx, s.opts.Pool, principal(ctx).ProjectID, in.ID)
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	return &taskOutput{Body: t}, nil
}

func (s *Server) updateTask(ctx context.Context, in *taskPatchInput) (*taskOutput, error) {
	b := in.Body
	p := jobs.TaskPatch{Name: b.Name, Schedule: b.Schedule.patch(), Timezone: b.Timezone, Action: b.Action, Active: b.Active,
		Overlap: b.Overlap, MaxConcurrency: b.MaxConcurrency.patch(), MaxAttempts: b.MaxAttempts, TimeoutSeconds: b.TimeoutSeconds, Priority: b.Priority}
	if err := s.requirePublishRoom(ctx, b.Action); err != nil {
		return nil, err
	}
	t, err := jobs.UpdateTask(ctx, s.opts.Pool, principal(ctx).ProjectID, in.ID, p, s.opts.WebhookAllowPrivate)
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	s.tasksChanged()
	return &taskOutput{Body: t}, nil
}

func (s *Server) deleteTask(ctx context.Context, in *taskIDInput) (*struct{}, error) {
	if err := jobs.DeleteTask(ctx, s.opts.Pool, principal(ctx).ProjectID, in.ID); err != nil {
		return nil, s.taskError(ctx, err)
	}
	s.tasksChanged()
	return nil, nil
}

func (s *Server) rotateSecret(ctx context.Context, in *rotateSecretInput) (*taskOutput, error) {
	var until *time.Time
	if in.Body != nil {
		until = in.Body.PreviousExpiresAt
	}
	t, err := jobs.RotateSigningSecret(ctx, s.opts.Pool, principal(ctx).ProjectID, in.ID, until)
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	return &taskOutput{Body: t}, nil
}

// taskError maps validation and cursor errors to 422 and the rest through fail.
func (s *Server) taskError(ctx context.Context, err error) error {
	if v, ok := jobs.IsValidation(err); ok {
		return huma.Error422UnprocessableEntity(v.Msg, &huma.ErrorDetail{Location: "body." + v.Field, Message: v.Msg})
	}
	if errors.Is(err, jobs.ErrBadCursor) {
		return huma.Error422UnprocessableEntity(err.Error(), &huma.ErrorDetail{Location: "query.cursor", Message: err.Error()})
	}
	return s.fail(ctx, err, "no such task", "a run of this task is already queued or running and overlap is skip; wait for it to finish or set overlap to allow")
}

// tasksChanged wakes this node's claim loop so a new schedule takes effect
// before its next poll.
func (s *Server) tasksChanged() {
	if s.opts.TasksChanged != nil {
		s.opts.TasksChanged()
	}
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
