package apiclient

import (
	"context"
	"net/url"
	"strconv"
)

// ListOptions pick one page of a list.
type ListOptions struct {
	Limit  int    // 0: the server's default
	Cursor string // next_cursor of the previous page
	Status string // runs only: one status
	Kind   string // tasks only: scheduled or on_demand
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("cursor", o.Cursor)
	set("status", o.Status)
	set("kind", o.Kind)
	return q
}

// Tasks returns one page of the project's tasks.
func (c *Client) Tasks(ctx context.Context, o ListOptions) (TaskPage, error) {
	var p TaskPage
	return p, c.do(ctx, request{op: OpTaskList, query: o.query(), out: &p})
}

// Task returns one task.
func (c *Client) Task(ctx context.Context, id string) (Task, error) {
	var t Task
	return t, c.do(ctx, request{op: OpTaskGet, args: []string{id}, out: &t})
}

// CreateTask makes a task; the answer holds its signing secret.
func (c *Client) CreateTask(ctx context.Context, in TaskCreate) (Task, error) {
	var t Task
	return t, c.do(ctx, request{op: OpTaskCreate, in: in, out: &t})
}

// UpdateTask changes the fields in sets.
func (c *Client) UpdateTask(ctx context.Context, id string, in TaskPatch) (Task, error) {
	var t Task
	return t, c.do(ctx, request{op: OpTaskUpdate, args: []string{id}, in: in, out: &t})
}

// DeleteTask deletes a task and its runs.
func (c *Client) DeleteTask(ctx context.Context, id string) error {
	return c.do(ctx, request{op: OpTaskDelete, args: []string{id}})
}

// TriggerTask makes a manual run.
func (c *Client) TriggerTask(ctx context.Context, id string, in Trigger) (Run, error) {
	var r Run
	return r, c.do(ctx, request{op: OpTaskTrigger, args: []string{id}, in: in, out: &r})
}

// BackfillTask runs each tick of the range that has no run yet.
func (c *Client) BackfillTask(ctx context.Context, id string, in Backfill) (BackfillResult, error) {
	var b BackfillResult
	return b, c.do(ctx, request{op: OpTaskBackfill, args: []string{id}, in: in, out: &b})
}

// RotateSecret gives a task a new signing secret; the answer holds it.
func (c *Client) RotateSecret(ctx context.Context, id string, in RotateSecret) (Task, error) {
	var t Task
	return t, c.do(ctx, request{op: OpTaskRotate, args: []string{id}, in: in, out: &t})
}
