package jobs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/quota"
)

// ErrRunNotRetryable is returned by RetryRun for a run that did not fail
// and was not cancelled. It wraps db.ErrConflict.
var ErrRunNotRetryable = fmt.Errorf("%w: only a failed or cancelled run can be retried", db.ErrConflict)

// RetryRun starts a new manual run of a failed or cancelled run's task with
// the same input and priority, linked to it by retry_of. A run is retried once: asking
// again within the idempotency window answers the same retry (Replayed);
// to try again after the retry failed, retry the retry.
func RetryRun(ctx context.Context, q db.DB, client *river.Client[pgx.Tx], lim quota.Limits, projectID, runID string) (TriggerResult, error) {
	if uuid.Validate(runID) != nil {
		return TriggerResult{}, db.ErrNotFound
	}
	var status, taskID string
	var payload json.RawMessage
	var priority int
	err := q.QueryRow(ctx, `
		SELECT r.status, r.task_id::text, r.payload, r.priority FROM task_runs r JOIN tasks t ON t.id = r.task_id
		WHERE r.id = $1 AND t.project_id = $2`, runID, projectID).Scan(&status, &taskID, &payload, &priority)
	if err != nil {
		return TriggerResult{}, db.Translate(err)
	}
	if status != StatusFailed && status != StatusCancelled {
		return TriggerResult{}, ErrRunNotRetryable
	}
	return Trigger(ctx, q, client, lim, TriggerRequest{
		ProjectID: projectID, TaskID: taskID, Payload: payload, RetryOf: runID, Priority: priority,
		IdempotencyKey: retryKeyPrefix + runID,
	})
}

// retryKeyPrefix starts the idempotency keys of retries (one retry per
// run); a trigger from a user may not use it.
const retryKeyPrefix = "retry-of:"
