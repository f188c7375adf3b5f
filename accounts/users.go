package accounts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// User is an account: its address in NormalizeEmail's form, its role, and
// whether an operator disabled it.
type User struct {
	ID        string
	Email     string
	Role      string
	Disabled  bool
	CreatedAt time.Time
	// TokenGeneration is what the account's tokens carry: it goes up when
	// every session of the account is ended (EndSessions).
	TokenGeneration int
}

const userColumns = "id::text, email, role, disabled_at IS NOT NULL, created_at, token_generation"

func scanUser(row pgx.Row, u *User, extra ...any) error {
	return row.Scan(append([]any{&u.ID, &u.Email, &u.Role, &u.Disabled, &u.CreatedAt, &u.TokenGeneration}, extra...)...)
}

// CreateUser stores a new account with the user role; email must be
// normalised (NormalizeEmail) and passwordHash made by HashPassword. A taken
// address is ErrEmailTaken.
func CreateUser(ctx context.Context, q db.DB, email, passwordHash string) (User, error) {
	var u User
	err := scanUser(q.QueryRow(ctx, `
		INSERT INTO users (email, password_hash) VALUES ($1, $2)
		RETURNING `+userColumns, email, passwordHash), &u)
	return u, translate(err, ErrUserNotFound)
}

// UserByID returns the account with that id, or ErrUserNotFound.
func UserByID(ctx context.Context, q db.DB, id string) (User, error) {
	var u User
	err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id), &u)
	return u, translate(err, ErrUserNotFound)
}

// UserByEmail returns the account with that address, normalised first, or
// ErrUserNotFound. An address that does not normalise is matched exactly:
// only accounts from before normalisation (migration 00006 disabled them)
// can hold one.
func UserByEmail(ctx context.Context, q db.DB, email string) (User, error) {
	if norm, err := NormalizeEmail(email); err == nil {
		email = norm
	}
	u, _, err := userWithHash(ctx, q, email)
	return u, err
}

// userWithHash returns the account with that address and its password
// hash; email must be normalised (the column holds only normalised
// addresses).
func userWithHash(ctx context.Context, q db.DB, email string) (User, string, error) {
	var u User
	var hash string
	err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+`, password_hash FROM users WHERE email = $1`, email), &u, &hash)
	return u, hash, translate(err, ErrUserNotFound)
}

// ActiveRole is what every authenticated request reads: the role of an
// enabled account as stored now (not when its token was made), or
// ErrAccountGone or ErrAccountDisabled.
func ActiveRole(ctx context.Context, q db.DB, id string) (string, error) {
	var role string
	var disabled bool
	err := q.QueryRow(ctx, `SELECT role, disabled_at IS NOT NULL FROM users WHERE id = $1`, id).Scan(&role, &disabled)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", ErrAccountGone
	case err != nil:
		return "", fmt.Errorf("read account: %w", db.Translate(err))
	case disabled:
		return "", ErrAccountDisabled
	}
	return role, nil
}

// UserChange is what an operator changes on an account; nil leaves a field
// alone.
type UserChange struct {
	Role     *string
	Disabled *bool
}

func (c UserChange) empty() bool { return c.Role == nil && c.Disabled == nil }

// UpdateUser applies a change to the account with that id and returns it,
// or ErrUserNotFound. An account already in the wanted state is not
// written (updated_at stays).
func UpdateUser(ctx context.Context, q db.DB, id string, c UserChange) (User, error) {
	if c.empty() {
		return UserByID(ctx, q, id)
	}
	return updateUser(ctx, q, "id = $1", id, c)
}

// UpdateUserByEmail applies a change to the account with that address:
// how the operator commands grant and revoke the admin role and disable
// accounts. It fails with ErrUserNotFound when no account has the address.
func UpdateUserByEmail(ctx context.Context, q db.DB, email string, c UserChange) (User, error) {
	norm, err := NormalizeEmail(email)
	if err != nil {
		return User{}, fmt.Errorf("email %q: %w", email, err)
	}
	return updateUser(ctx, q, "email = $1", norm, c)
}

// updateUser applies a change to the account that where (a condition on
// $1) selects.
func updateUser(ctx context.Context, q db.DB, where, value string, c UserChange) (User, error) {
	if c.Role != nil && !ValidRole(*c.Role) {
		return User{}, ErrInvalidRole
	}
	var u User
	err := scanUser(q.QueryRow(ctx, `
		UPDATE users SET
			role = coalesce($2, role),
			disabled_at = CASE WHEN $3::boolean IS NULL THEN disabled_at
			                   WHEN $3 THEN coalesce(disabled_at, now()) END,
			updated_at = now()
		WHERE `+where+`
		  AND (role IS DISTINCT FROM coalesce($2, role)
		       OR (disabled_at IS NOT NULL) IS DISTINCT FROM coalesce($3, disabled_at IS NOT NULL))
		RETURNING `+userColumns, value, c.Role, c.Disabled), &u)
	if errors.Is(err, pgx.ErrNoRows) { // unchanged, or no such account
		err = scanUser(q.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE `+where, value), &u)
	}
	return u, translate(err, ErrUserNotFound)
}

// Admins lists the accounts with the admin role, oldest first.
func Admins(ctx context.Context, q db.DB) ([]User, error) {
	rows, err := q.Query(ctx, `SELECT `+userColumns+` FROM users WHERE role = 'admin' ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list admins: %w", err)
	}
	users, err := pgx.CollectRows(rows, collectUser)
	if err != nil {
		return nil, fmt.Errorf("list admins: %w", err)
	}
	return users, nil
}

func collectUser(row pgx.CollectableRow) (User, error) {
	var u User
	err := scanUser(row, &u)
	return u, err
}

// Position is where a listing of accounts goes on: after the account
// created at CreatedAt with ID. The zero Position is the start.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// ListUsers returns at most limit accounts after the position, oldest
// first, and whether more follow. A position is not a row, so a page after
// an account deleted since goes on with the next one.
func ListUsers(ctx context.Context, q db.DB, after Position, limit int) ([]User, bool, error) {
	if after.ID == "" {
		after.ID = "00000000-0000-0000-0000-000000000000"
	}
	// One row more than the page: only then is there a next page.
	rows, err := q.Query(ctx, `
		SELECT `+userColumns+` FROM users
		WHERE (created_at, id) > ($1, $2::uuid)
		ORDER BY created_at, id LIMIT $3`, after.CreatedAt, after.ID, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list users: %w", err)
	}
	users, err := pgx.CollectRows(rows, collectUser)
	if err != nil {
		return nil, false, fmt.Errorf("list users: %w", err)
	}
	if len(users) <= limit {
		return users, false, nil
	}
	return users[:limit], true, nil
}
