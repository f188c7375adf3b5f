package web

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/infra/db"
)

const (
	roleUser  = "user"
	roleAdmin = "admin"
)

// User is an account as the API shows it.
type User struct {
	ID        string    `json:"id" format:"uuid"`
	Email     string    `json:"email" format:"email"`
	Role      string    `json:"role" enum:"admin,user"`
	CreatedAt time.Time `json:"created_at"`
}

const userColumns = "id::text, email, role, created_at"

func scanUser(row interface{ Scan(...any) error }, u *User) error {
	return row.Scan(&u.ID, &u.Email, &u.Role, &u.CreatedAt)
}

func userCreate(ctx context.Context, q db.DB, email, hash, role string) (User, error) {
	var u User
	err := scanUser(q.QueryRow(ctx, `
		INSERT INTO users (email, password_hash, role) VALUES ($1, $2, $3)
		RETURNING `+userColumns, email, hash, role), &u)
	return u, db.Translate(err)
}

// userByEmail returns the user and its password hash.
func userByEmail(ctx context.Context, q db.DB, email string) (User, string, error) {
	var u User
	var hash string
	err := q.QueryRow(ctx, `SELECT `+userColumns+`, password_hash FROM users WHERE lower(email) = lower($1)`, email).
		Scan(&u.ID, &u.Email, &u.Role, &u.CreatedAt, &hash)
	return u, hash, db.Translate(err)
}

func userByID(ctx context.Context, q db.DB, id string) (User, error) {
	var u User
	err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id), &u)
	return u, db.Translate(err)
}

// userSetRole keeps the stored role in step with SWITCHBOARD_ADMIN_EMAILS.
func userSetRole(ctx context.Context, q db.DB, id, role string) error {
	_, err := q.Exec(ctx, `UPDATE users SET role = $2, updated_at = now() WHERE id = $1 AND role <> $2`, id, role)
	return err
}
