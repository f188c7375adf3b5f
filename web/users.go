package web

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
)

// User is an account as the API shows it.
type User struct {
	ID        string    `json:"id" format:"uuid"`
	Email     string    `json:"email" format:"email"`
	Role      string    `json:"role" enum:"admin,user" doc:"admin is granted by an operator (switchboard admin grant, or PATCH /v1/admin/users/{id}), never by registering"`
	Disabled  bool      `json:"disabled" doc:"a disabled account cannot log in and its tokens are refused"`
	CreatedAt time.Time `json:"created_at"`
}

func userOut(u accounts.User) User {
	return User{ID: u.ID, Email: u.Email, Role: u.Role, Disabled: u.Disabled, CreatedAt: u.CreatedAt}
}

// The operator commands' view of accounts.
type UserChange = accounts.UserChange

// Role names, for the operator commands.
const (
	RoleUser  = accounts.RoleUser
	RoleAdmin = accounts.RoleAdmin
)

// UpdateUserByEmail is accounts.UpdateUserByEmail.
func UpdateUserByEmail(ctx context.Context, q db.DB, email string, c UserChange) (accounts.User, error) {
	return accounts.UpdateUserByEmail(ctx, q, email, c)
}

// Admins is accounts.Admins.
func Admins(ctx context.Context, q db.DB) ([]accounts.User, error) { return accounts.Admins(ctx, q) }
