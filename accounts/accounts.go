// Package accounts owns Switchboard's accounts: users (their email address,
// password, role and whether they are disabled) and the rules on them — the
// one normal form of an email address, password hashing and checking — and
// answers, for every authenticated request, whether its account may still
// act. Its functions take a db.DB, so a caller can hand them a pool or a
// transaction; Postgres errors are translated here, once, into the errors
// below, which the HTTP front maps to problems.
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

// The refusals of a login and of an authenticated request.
var (
	ErrWrongPassword   error = &RefusedError{"wrong email or password"}
	ErrAccountGone     error = &RefusedError{"this account no longer exists"}
	ErrAccountDisabled error = &RefusedError{"this account is disabled; an operator can enable it again"}
)

// translate maps the error of a statement to the package's errors: no row
// is notFound, a taken address (the unique index users_email_key) is
// ErrEmailTaken, anything else as db.Translate maps it.
func translate(err, notFound error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", notFound, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "users_email_key" {
		return fmt.Errorf("%w: %w", ErrEmailTaken, err)
	}
	return db.Translate(err)
}
