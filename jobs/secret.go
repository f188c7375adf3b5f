package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/infra/db"
)

// DefaultSecretOverlap is how long a rotated-out signing secret keeps
// signing webhook calls when the rotation names no end.
const DefaultSecretOverlap = 24 * time.Hour

// MaxSecretOverlap bounds a rotation's overlap.
const MaxSecretOverlap = 30 * 24 * time.Hour

// RotateSigningSecret gives the project's task a new signing secret. The one
// it replaces keeps signing webhook calls beside it until previousUntil
// (nil: DefaultSecretOverlap from now; a time already past: it stops at
// once, as for a leaked secret), so receivers can switch without missing a
// call. A secret still in the overlap of an earlier rotation is dropped:
// at most two sign. The returned task carries the new secret.
func RotateSigningSecret(ctx context.Context, q db.DB, projectID, id string, previousUntil *time.Time) (Task, error) {
	if uuid.Validate(id) != nil {
		return Task{}, db.ErrNotFound
	}
	until := time.Now().Add(DefaultSecretOverlap)
	if previousUntil != nil {
		until = *previousUntil
	}
	if time.Until(until) > MaxSecretOverlap {
		return Task{}, invalid("previous_expires_at", "previous_expires_at is more than %d days ahead", MaxSecretOverlap/(24*time.Hour))
	}
	secret := NewSigningSecret()
	var out Task
	err := scanTask(q.QueryRow(ctx, `
		UPDATE tasks t SET previous_signing_secret = t.signing_secret, previous_secret_expires_at = $3,
			signing_secret = $4, updated_at = now()
		WHERE t.id = $1 AND t.project_id = $2
		RETURNING `+taskColumns, id, projectID, until, secret), &out)
	if err != nil {
		return Task{}, fmt.Errorf("rotate signing secret: %w", db.Translate(err))
	}
	out.SigningSecret = secret
	return out, nil
}
