package accounts

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// A session is what one user token (or the console cookie and River UI
// cookie that carry one) may do until it expires: the token names its
// account, the account's token generation when it was issued, and an id of
// its own. Ending one session stores its id in revoked_tokens until it
// would have expired; ending every session of an account (a password
// change, a reset, "sign out everywhere") increments the account's
// generation. Both are read by CheckSession, the one statement every
// request with a user token makes.

// Session is the token a request came with.
type Session struct {
	UserID string
	// TokenID is the token's jti: a UUID (TokenIDOf for a token issued
	// without one).
	TokenID string
	// Generation is the token's gen claim: the account's token generation
	// when it was issued (0 for a token issued without the claim).
	Generation int
}

// The refusals of an ended session.
var (
	ErrSessionEnded   error = &RefusedError{"this token was signed out; log in again"}
	ErrSessionsEnded  error = &RefusedError{"every session of this account was ended (password changed or reset, or signed out everywhere); log in again"}
	errMalformedToken       = errors.New("the token id is not a UUID")
)

// TokenIDOf names a token issued without a jti: the first 16 bytes of the
// SHA-256 of the whole token, as a UUID.
func TokenIDOf(rawToken string) string {
	h := sha256.Sum256([]byte(rawToken))
	id, _ := uuid.FromBytes(h[:16])
	return id.String()
}

// CheckSession is what every request with a user token reads, in one
// statement: the role of an enabled account as stored now (not when the
// token was made) and the project the request acts in — project, or the
// account's personal project when "" — with the account's role there; or
// ErrAccountGone, ErrAccountDisabled, ErrSessionsEnded (the token's
// generation is not the account's), ErrSessionEnded (the token was signed
// out) or ErrProjectNotFound (no such project, or the account is not a
// member and not an instance admin).
func CheckSession(ctx context.Context, q db.DB, s Session, project string) (Access, error) {
	if uuid.Validate(s.TokenID) != nil {
		return Access{}, errMalformedToken
	}
	wanted, err := projectParam(project)
	if err != nil {
		return Access{}, ErrProjectNotFound
	}
	var a Access
	var disabled, revoked bool
	var generation int
	var projectID, memberRole *string
	err = q.QueryRow(ctx, `
		SELECT u.role, u.disabled_at IS NOT NULL, u.token_generation,
		       EXISTS (SELECT FROM revoked_tokens WHERE jti = $2), p.id::text, m.role
		FROM users u
		LEFT JOIN projects p ON p.id = coalesce($3::uuid, (SELECT id FROM projects WHERE personal_of = u.id))
		LEFT JOIN project_members m ON m.project_id = p.id AND m.user_id = u.id
		WHERE u.id = $1`, s.UserID, s.TokenID, wanted).Scan(&a.Role, &disabled, &generation, &revoked, &projectID, &memberRole)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Access{}, ErrAccountGone
	case err != nil:
		return Access{}, fmt.Errorf("read account: %w", db.Translate(err))
	case disabled:
		return Access{}, ErrAccountDisabled
	case generation != s.Generation:
		return Access{}, ErrSessionsEnded
	case revoked:
		return Access{}, ErrSessionEnded
	}
	return a, projectOf(&a, projectID, memberRole)
}

// TokenGeneration is the account's token generation, which a new token
// carries; ErrUserNotFound for no such account.
func TokenGeneration(ctx context.Context, q db.DB, userID string) (int, error) {
	var gen int
	err := q.QueryRow(ctx, `SELECT token_generation FROM users WHERE id = $1`, userID).Scan(&gen)
	return gen, translate(err, ErrUserNotFound)
}

// EndSession signs one token out until it expires: every replica refuses
// it from its next request. Ending it again changes nothing.
func EndSession(ctx context.Context, q db.DB, s Session, expires time.Time) error {
	if uuid.Validate(s.TokenID) != nil {
		return errMalformedToken
	}
	_, err := q.Exec(ctx, `
		INSERT INTO revoked_tokens (jti, user_id, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (jti) DO NOTHING`, s.TokenID, s.UserID, expires)
	if err != nil {
		return fmt.Errorf("end session: %w", translate(err, ErrUserNotFound))
	}
	return nil
}

// EndSessions ends every session of the account (its generation goes up)
// and returns the new generation, for a token that should outlive them.
// ErrUserNotFound for no such account.
func EndSessions(ctx context.Context, q db.DB, userID string) (int, error) {
	var gen int
	err := q.QueryRow(ctx, `
		UPDATE users SET token_generation = token_generation + 1, updated_at = now()
		WHERE id = $1 RETURNING token_generation`, userID).Scan(&gen)
	return gen, translate(err, ErrUserNotFound)
}

// PruneEndedSessions deletes what no longer refuses or allows anything:
// signed-out tokens past their expiry and expired reset links. The
// maintenance loop runs it.
func PruneEndedSessions(ctx context.Context, q db.DB) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `
		WITH t AS (DELETE FROM revoked_tokens WHERE expires_at < now() RETURNING 1),
		     r AS (DELETE FROM password_resets WHERE expires_at < now() RETURNING 1)
		SELECT (SELECT count(*) FROM t) + (SELECT count(*) FROM r)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("prune ended sessions: %w", err)
	}
	return n, nil
}
