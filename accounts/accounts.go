// Package accounts owns Switchboard's accounts and their credentials: users
// (email address, password, role, whether an operator disabled them), their
// API keys, and the rules on both — the one normal form of an email
// address, password hashing and checking, the key format, hash and scopes.
// It answers, for every authenticated request, whether its account or key
// may still act.
//
// Its functions take a db.DB, so a caller can hand them a pool or a
// transaction. Postgres errors are translated here, once (translate), into
// the package's errors: not-found and conflict errors wrap db.ErrNotFound
// and db.ErrConflict, a credential or account that may not act is a
// *RefusedError and an action that is not allowed a *ForbiddenError, whose
// texts are for the caller. The HTTP front answers them
// as problems; the operator commands print them.
package accounts

import (
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard/switchboard/infra/db"
)

// Roles of an account. Every account starts as a user; admin is granted by
// an operator, never by registering.
const (
	RoleUser  = "user"
	RoleAdmin = "admin"
)

// ValidRole reports whether role is one an account can have.
func ValidRole(role string) bool { return role == RoleUser || role == RoleAdmin }

// Errors of lookups and writes. They wrap db.ErrNotFound and db.ErrConflict,
// so a caller that needs only the kind (404, 409) can test for that.
var (
	ErrUserNotFound = fmt.Errorf("%w: no such account", db.ErrNotFound)
	ErrEmailTaken   = fmt.Errorf("%w: an account with this email already exists", db.ErrConflict)
	ErrInvalidRole  = errors.New("role must be admin or user")
)

// RefusedError is a credential or an account that may not act: a wrong
// password, a deleted or disabled account. Its text says why, in words for
// the caller.
type RefusedError struct{ reason string }

func (e *RefusedError) Error() string { return e.reason }

// ForbiddenError is an action that the account, or the instance's policy,
// does not allow: registering where registration is closed, changing a
// password without the current one. Its text says why, for the caller.
type ForbiddenError struct{ reason string }

func (e *ForbiddenError) Error() string { return e.reason }

// The refusals of a login and of an authenticated request.
var (
	ErrWrongPassword   error = &RefusedError{"wrong email or password"}
	ErrAccountGone     error = &RefusedError{"this account no longer exists"}
	ErrAccountDisabled error = &RefusedError{"this account is disabled; an operator can enable it again"}
)

// translate maps the error of a statement to the package's errors: no row,
// or a row referring to an account that does not exist (a foreign key
// violation), is notFound; a taken address (the unique index
// users_email_key) is ErrEmailTaken, anything else as db.Translate maps it.
func translate(err, notFound error) error {
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pgErr) && pgErr.Code == pgerrcode.ForeignKeyViolation {
		return fmt.Errorf("%w: %w", notFound, err)
	}
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "users_email_key" {
		return fmt.Errorf("%w: %w", ErrEmailTaken, err)
	}
	return db.Translate(err)
}
