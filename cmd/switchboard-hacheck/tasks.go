package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// task and run hold the API.md fields the checks read.
type task struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Active    bool       `json:"active"`
	NextRunAt *time.Time `json:"next_run_at"`
	CreatedAt time.Time  `json:"created_at"`
}

type run struct {
	ID           string     `json:"id"`
	TaskID       string     `json:"task_id"`
	Status       string     `json:"status"`
	Trigger      string     `json:"trigger"`
	ScheduledFor *time.Time `json:"scheduled_for"`
	StartedAt    *time.Time `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at"`
	Attempt      int        `json:"attempt"`
	HTTPStatus   *int       `json:"http_status"`
	Error        *string    `json:"error"`
}

func (r run) terminal() bool {
	return slices.Contains([]string{"succeeded", "failed", "cancelled"}, r.Status)
}

// manualOnly is a schedule that does not come due during a run.
const manualOnly = "0 0 1 1 *"

// webhookTask is a create body for a task calling url.
func webhookTask(name, schedule, url string) map[string]any {
	return map[string]any{
		"name": name, "schedule": schedule, "timezone": "UTC",
		"action":  map[string]any{"type": "webhook", "url": url, "method": "POST", "body": map[string]any{"check": name}},
		"overlap": "allow", "max_attempts": 5, "timeout_seconds": 20,
	}
}

// createTask creates a task as u through replica r.
func (h *harness) createTask(ctx context.Context, u *user, r int, body map[string]any) (*task, error) {
	var t task
	if err := h.expect(ctx, r, http.MethodPost, "/v1/tasks", u.Token, body, http.StatusCreated, &t); err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	return &t, nil
}

// trigger queues a manual run through replica r.
func (h *harness) trigger(ctx context.Context, u *user, r int, taskID string) (*run, error) {
	var rn run
	if err := h.expect(ctx, r, http.MethodPost, "/v1/tasks/"+taskID+"/runs", u.Token, struct{}{}, http.StatusAccepted, &rn); err != nil {
		return nil, fmt.Errorf("trigger run: %w", err)
	}
	return &rn, nil
}

// getRun reads a run through any live replica.
func (h *harness) getRun(ctx context.Context, u *user, id string) (*run, error) {
	resp, _, err := h.retrier().do(ctx, 0, http.MethodGet, "/v1/runs/"+id, u.Token, nil)
	if err != nil {
		return nil, err
	}
	var rn run
	if err := checkStatus(resp, "GET", "/v1/runs/"+id, 0, http.StatusOK, &rn); err != nil {
		return nil, err
	}
	return &rn, nil
}

// waitTerminal polls the runs until each is succeeded, failed or cancelled,
// or the time is up; it returns the last state of each.
func (h *harness) waitTerminal(ctx context.Context, u *user, ids []string, d time.Duration) (map[string]*run, error) {
	deadline := time.Now().Add(d)
	out := map[string]*run{}
	for {
		pending := 0
		for _, id := range ids {
			if r := out[id]; r != nil && r.terminal() {
				continue
			}
			r, err := h.getRun(ctx, u, id)
			if err != nil {
				return out, err
			}
			out[id] = r
			if !r.terminal() {
				pending++
			}
		}
		if pending == 0 {
			return out, nil
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("%d of %d runs not finished after %s", pending, len(ids), d)
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// taskRuns lists every run of a task.
func (h *harness) taskRuns(ctx context.Context, u *user, taskID string) ([]run, error) {
	var runs []run
	err := h.listAll(ctx, "/v1/tasks/"+taskID+"/runs", u.Token, func(raw json.RawMessage) error {
		var r run
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		runs = append(runs, r)
		return nil
	})
	return runs, err
}
