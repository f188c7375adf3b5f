package accounts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// Changing a password and resetting a forgotten one. Both end every
// session of the account (EndSessions) in the statement that sets the
// password, and both void the account's unused reset links.

// ResetTTL is how long a password reset link works.
const ResetTTL = time.Hour

// ResetTokenPrefix starts every reset token, so a log or a report can tell
// what a leaked string is.
const ResetTokenPrefix = "sbr_"

// Errors of password changes and resets.
var (
	ErrWrongCurrentPassword error = &ForbiddenError{"the current password is wrong"}
	ErrPasswordChanged            = fmt.Errorf("%w: the password was changed meanwhile; try again with the new one", db.ErrConflict)
	ErrResetLinkInvalid           = errors.New("this reset link is unknown, was used already or has expired: ask for a new one")
)

// ChangePassword sets a new password of an account that proves it knows
// the current one, ends every session of the account, and returns the
// account with its new token generation (for the one token that outlives
// the change). The new password must pass CheckNewPassword (checked before
// any hashing); a wrong current password is ErrWrongCurrentPassword.
func (p *Passwords) ChangePassword(ctx context.Context, q db.DB, userID, current, next string) (User, error) {
	if err := CheckNewPassword(next); err != nil {
		return User{}, err
	}
	var u User
	var old string
	err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+`, password_hash FROM users WHERE id = $1`, userID), &u, &old)
	if err != nil {
		return User{}, translate(err, ErrUserNotFound)
	}
	if ok, err := p.matches(ctx, []byte(old), current); err != nil || !ok {
		return User{}, cmp.Or(err, ErrWrongCurrentPassword)
	}
	hash, err := p.Hash(ctx, next)
	if err != nil {
		return User{}, err
	}
	// The old hash in the condition: of two changes racing with the same
	// current password, one wins and the other is told.
	u, err = setPassword(ctx, q, `SELECT id AS user_id FROM users WHERE id = $1 AND password_hash = $4`, userID, hash, nil, old)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, ErrPasswordChanged
	}
	return u, err
}

// setPassword sets the password of the account that target (a query of
// one user_id) selects, ends its sessions and voids its unused reset
// links but the one whose hash is $3.
func setPassword(ctx context.Context, q db.DB, target string, args ...any) (User, error) {
	var u User
	err := scanUser(q.QueryRow(ctx, `
		WITH target AS (`+target+`),
		u AS (
			UPDATE users SET password_hash = $2, token_generation = token_generation + 1, updated_at = now()
			FROM target WHERE users.id = target.user_id
			RETURNING `+userColumns+`
		), void AS (
			UPDATE password_resets r SET used_at = now() FROM u
			WHERE r.user_id = u.id::uuid AND r.used_at IS NULL AND r.token_hash IS DISTINCT FROM $3::bytea
		)
		SELECT * FROM u`, args...), &u)
	if err != nil {
		return User{}, fmt.Errorf("set password: %w", err)
	}
	return u, nil
}

// NewPasswordReset makes a single-use reset link token for the account,
// valid ResetTTL; only its SHA-256 is stored. ErrUserNotFound for no such
// account.
func NewPasswordReset(ctx context.Context, q db.DB, userID string) (string, time.Time, error) {
	token := secretKind(ResetTokenPrefix).newSecret()
	var expires time.Time
	err := q.QueryRow(ctx, `
		INSERT INTO password_resets (token_hash, user_id, expires_at) VALUES ($1, $2, now() + $3::interval)
		RETURNING expires_at`, hashSecret(token), userID, ResetTTL.String()).Scan(&expires)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("new password reset: %w", translate(err, ErrUserNotFound))
	}
	return token, expires, nil
}

// ResetPassword sets the password of the account a reset link belongs to
// and uses the link up (once, under any concurrency), ends every session of
// the account and voids its other links. A link that is malformed,
// unknown, used or expired is ErrResetLinkInvalid; the password must pass
// CheckNewPassword. Nothing changes when either fails.
func (p *Passwords) ResetPassword(ctx context.Context, q db.DB, token, password string) (User, error) {
	if err := CheckNewPassword(password); err != nil {
		return User{}, err
	}
	if !secretKind(ResetTokenPrefix).wellFormed(token) {
		return User{}, ErrResetLinkInvalid
	}
	// A cheap look first, so a guessed token costs no hashing.
	link := hashSecret(token)
	err := q.QueryRow(ctx, `
		SELECT FROM password_resets
		WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()`, link).Scan()
	if err != nil {
		return User{}, resetErr(err)
	}
	hash, err := p.Hash(ctx, password)
	if err != nil {
		return User{}, err
	}
	u, err := setPassword(ctx, q, `
		UPDATE password_resets SET used_at = now()
		WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now() RETURNING user_id`, link, hash, link)
	if err != nil {
		return User{}, resetErr(err) // no row: used up by a concurrent reset
	}
	return u, nil
}

func resetErr(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrResetLinkInvalid
	}
	return fmt.Errorf("reset password: %w", err)
}

// ResetURL is the link a person follows to reset a password: the
// console's reset page at publicURL (scheme://host[:port]) with the token.
func ResetURL(publicURL, token string) string {
	return strings.TrimRight(publicURL, "/") + "/console/#/reset?token=" + token
}
