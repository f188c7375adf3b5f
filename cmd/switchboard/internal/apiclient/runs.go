package apiclient

import "context"

// Runs returns one page of the runs of the project's tasks, or of one task
// when taskID is set; newest first.
func (c *Client) Runs(ctx context.Context, taskID string, o ListOptions) (RunPage, error) {
	var p RunPage
	o.Kind = ""
	if taskID != "" {
		return p, c.do(ctx, request{op: OpTaskRuns, args: []string{taskID}, query: o.query(), out: &p})
	}
	return p, c.do(ctx, request{op: OpRunList, query: o.query(), out: &p})
}

// Run returns one run.
func (c *Client) Run(ctx context.Context, id string) (Run, error) {
	var r Run
	return r, c.do(ctx, request{op: OpRunGet, args: []string{id}, out: &r})
}

// Attempts returns every attempt of a run, first first.
func (c *Client) Attempts(ctx context.Context, id string) (AttemptList, error) {
	var l AttemptList
	return l, c.do(ctx, request{op: OpRunAttempts, args: []string{id}, out: &l})
}

// CancelRun cancels a queued or running run.
func (c *Client) CancelRun(ctx context.Context, id string) (Run, error) {
	var r Run
	return r, c.do(ctx, request{op: OpRunCancel, args: []string{id}, out: &r})
}

// RetryRun makes a new run of a failed or cancelled one.
func (c *Client) RetryRun(ctx context.Context, id string) (Run, error) {
	var r Run
	return r, c.do(ctx, request{op: OpRunRetry, args: []string{id}, out: &r})
}
