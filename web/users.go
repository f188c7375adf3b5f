package web

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/jobs"
)

const (
	roleUser  = "user"
	roleAdmin = "admin"
)

// Role names, for the operator commands.
const (
	RoleUser  = roleUser
	RoleAdmin = roleAdmin
)

// User is an account as the API shows it.
type User struct {
	ID        string    `json:"id" format:"uuid"`
	Email     string    `json:"email" format:"email"`
	Role      string    `json:"role" enum:"admin,user" doc:"admin is granted by an operator (switchboard admin grant, or PATCH /v1/admin/users/{id}), never by registering"`
	Disabled  bool      `json:"disabled" doc:"a disabled account cannot log in and its tokens are refused"`
	CreatedAt time.Time `json:"created_at"`
}

const userColumns = "id::text, email, role, disabled_at IS NOT NULL, created_at"

func scanUser(row interface{ Scan(...any) error }, u *User, extra ...any) error {
	return row.Scan(append([]any{&u.ID, &u.Email, &u.Role, &u.Disabled, &u.CreatedAt}, extra...)...)
}

// userCreate stores a new account; email must be normalised.
func userCreate(ctx context.Context, q db.DB, email, hash string) (User, error) {
	var u User
	err := scanUser(q.QueryRow(ctx, `
		INSERT INTO users (email, password_hash) VALUES ($1, $2)
		RETURNING `+userColumns, email, hash), &u)
	return u, db.Translate(err)
}

// userByEmail returns the user and its password hash; email must be
// normalised (the column holds only normalised addresses).
func userByEmail(ctx context.Context, q db.DB, email string) (User, string, error) {
	var u User
	var hash string
	err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+`, password_hash FROM users WHERE email = $1`, email), &u, &hash)
	return u, hash, db.Translate(err)
}

func userByID(ctx context.Context, q db.DB, id string) (User, error) {
	var u User
	err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id), &u)
	return u, db.Translate(err)
}

// UserChange is what an operator changes on an account; nil leaves a field
// alone.
type UserChange struct {
	Role     *string
	Disabled *bool
}

func (c UserChange) empty() bool { return c.Role == nil && c.Disabled == nil }

// userUpdate applies a change to the account whose column key ("id" or
// "email", normalised) equals value, and returns it. An account already in
// the wanted state is not written (updated_at stays).
func userUpdate(ctx context.Context, q db.DB, key, value string, c UserChange) (User, error) {
	where := "id = $1"
	if key == "email" {
		where = "email = $1"
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
	return u, db.Translate(err)
}

// UpdateUserByEmail changes the account with that email: how the
// `switchboard admin` commands grant and revoke the admin role and disable
// accounts. It fails with db.ErrNotFound when no account has the address.
func UpdateUserByEmail(ctx context.Context, q db.DB, email string, c UserChange) (User, error) {
	norm, err := accounts.NormalizeEmail(email)
	if err != nil {
		return User{}, fmt.Errorf("email %q: %w", email, err)
	}
	if c.Role != nil && *c.Role != roleUser && *c.Role != roleAdmin {
		return User{}, errors.New("role must be admin or user")
	}
	return userUpdate(ctx, q, "email", norm, c)
}

// Admins lists the accounts with the admin role, oldest first.
func Admins(ctx context.Context, q db.DB) ([]User, error) {
	rows, err := q.Query(ctx, `SELECT `+userColumns+` FROM users WHERE role = 'admin' ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list admins: %w", err)
	}
	defer rows.Close()
	var out []User
	for rows.Next() {
		var u User
		if err := scanUser(rows, &u); err != nil {
			return nil, fmt.Errorf("list admins: %w", err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// userList is a page of accounts, oldest first: at most limit of them
// after the position cursor names ("" for the first page), and the cursor
// of the next page ("" on the last).
func userList(ctx context.Context, q db.DB, cursor string, limit int) ([]User, string, error) {
	after, afterID := time.Time{}, "00000000-0000-0000-0000-000000000000"
	if cursor != "" {
		var err error
		if after, afterID, err = jobs.DecodeCursor(cursor); err != nil {
			return nil, "", err
		}
	}
	// One row more than the page: only then is there a next page.
	rows, err := q.Query(ctx, `
		SELECT `+userColumns+` FROM users
		WHERE (created_at, id) > ($1, $2::uuid)
		ORDER BY created_at, id LIMIT $3`, after, afterID, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	out := []User{}
	for rows.Next() {
		var u User
		if err := scanUser(rows, &u); err != nil {
			return nil, "", fmt.Errorf("list users: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil || len(out) <= limit {
		return out, "", err
	}
	out = out[:limit]
	last := out[limit-1]
	return out, jobs.EncodeCursor(last.CreatedAt, last.ID), nil
}

// account is what every authenticated request reads: whether the account
// still exists, is enabled, and its role now (not when the token was made).
type account struct {
	role     string
	disabled bool
}

func accountOf(ctx context.Context, q db.DB, id string) (account, error) {
	var a account
	err := q.QueryRow(ctx, `SELECT role, disabled_at IS NOT NULL FROM users WHERE id = $1`, id).Scan(&a.role, &a.disabled)
	return a, db.Translate(err)
}
