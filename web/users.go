package web

import (
	"time"

	"github.com/switchboard/switchboard/accounts"
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
