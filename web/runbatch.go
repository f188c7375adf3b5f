package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/switchboard/switchboard/jobs"
)

// maxBatchBody bounds a batch trigger's body: 1 000 items with room for
// sizeable payloads (each item's payload is still at most 64 KiB).
const maxBatchBody = 8 << 20

type batchTriggerInput struct {
	IDPath
	Body struct {
		Items []triggerBody `json:"items" minItems:"1" maxItems:"1000" doc:"the runs to make, each with its own input; answered in this order"`
	}
}

// batchItemResult answers one item of a batch trigger.
type batchItemResult struct {
	Status   int              `json:"status" doc:"202 created; 200 the earlier run of a repeated idempotency_key (replayed); 409 or 422: this item made nothing, see problem"`
	Replayed bool             `json:"replayed" doc:"true: run is the earlier run its idempotency_key names (made before, or by an earlier item of this batch)"`
	Run      *jobs.Run        `json:"run,omitempty" doc:"the run made or found; absent when status is 409 or 422"`
	Problem  *huma.ErrorModel `json:"problem,omitempty" doc:"why this item made nothing (409 or 422); absent otherwise"`
}

type batchTriggerOutput struct {
	Body struct {
		Created  int               `json:"created" doc:"items that made a run"`
		Replayed int               `json:"replayed" doc:"items answered with an earlier run"`
		Failed   int               `json:"failed" doc:"items that made nothing (409 or 422)"`
		Items    []batchItemResult `json:"items" doc:"one answer per item, in input order"`
	}
}

func registerRunBatch(api huma.API, s *Server) {
	huma.Register(api, huma.Operation{
		OperationID: "task-run-batch-create", Method: http.MethodPost, Path: "/v1/tasks/{id}/runs/batch",
		Summary: "Run a task up to 1 000 times, each with its own input", Tags: []string{"Runs"}, Security: bearer,
		Description: "One transaction for the whole batch; one answer per item, in input order: 202 created, 200 the earlier run " +
			"of a repeated idempotency_key (also one given by an earlier item), or the item's own 409 or 422 problem while the " +
			"others proceed. A body that does not fit the schema (more than 1000 items, a malformed item) is a 422 for the whole " +
			"batch and makes nothing. 409 for a task whose overlap is cancel_other.",
		MaxBodyBytes: maxBatchBody,
		Errors:       []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity},
	}, s.triggerBatch)
}

func (s *Server) triggerBatch(ctx context.Context, in *batchTriggerInput) (*batchTriggerOutput, error) {
	if s.opts.River == nil {
		return nil, s.fail(ctx, errors.New("no river client wired for manual runs"), "", "")
	}
	reqs := make([]jobs.TriggerRequest, len(in.Body.Items))
	for i, it := range in.Body.Items {
		reqs[i] = jobs.TriggerRequest{Payload: it.Payload, RunAt: it.RunAt, IdempotencyKey: it.IdempotencyKey, Priority: it.Priority}
	}
	results, err := jobs.TriggerBatch(ctx, s.opts.Pool, s.opts.River, s.opts.Quotas, principal(ctx).ProjectID, in.ID, reqs)
	if errors.Is(err, jobs.ErrBatchCancelOther) {
		return nil, huma.Error409Conflict("the task's overlap is cancel_other: each item would cancel the one before it; trigger one run")
	}
	if err != nil {
		return nil, s.taskError(ctx, err)
	}
	out := &batchTriggerOutput{}
	out.Body.Items = make([]batchItemResult, len(results))
	var created []jobs.Run
	for i, r := range results {
		out.Body.Items[i] = batchItem(i, r)
		switch {
		case r.Err != nil:
			out.Body.Failed++
		case r.Replayed:
			out.Body.Replayed++
		default:
			out.Body.Created++
			created = append(created, r.Run)
		}
	}
	s.announce(ctx, created...)
	return out, nil
}

// batchItem is the answer to item i.
func batchItem(i int, r jobs.BatchItemResult) batchItemResult {
	if v, ok := jobs.IsValidation(r.Err); ok {
		loc := fmt.Sprintf("body.items[%d].%s", i, v.Field)
		return batchItemResult{Status: http.StatusUnprocessableEntity, Problem: &huma.ErrorModel{
			Status: http.StatusUnprocessableEntity, Title: http.StatusText(http.StatusUnprocessableEntity), Detail: v.Msg,
			Errors: []*huma.ErrorDetail{{Location: loc, Message: v.Msg}},
		}}
	}
	if r.Err != nil { // ErrRunActive: the only other error of an item
		return batchItemResult{Status: http.StatusConflict, Problem: &huma.ErrorModel{
			Status: http.StatusConflict, Title: http.StatusText(http.StatusConflict),
			Detail: "a run of this task is already queued or running and overlap is skip (or one waits, buffer_one)",
		}}
	}
	if r.Replayed {
		return batchItemResult{Status: http.StatusOK, Replayed: true, Run: &r.Run}
	}
	return batchItemResult{Status: http.StatusAccepted, Run: &r.Run}
}
