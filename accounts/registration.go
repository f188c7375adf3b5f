package accounts

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/db"
)

// Registration is who may create an account by registering
// (SWITCHBOARD_REGISTRATION). Operators make accounts whatever it says
// (switchboard admin create-user).
type Registration string

// The registration policies.
const (
	// RegistrationOpen: anyone may register.
	RegistrationOpen Registration = "open"
	// RegistrationInvite: only with a valid invite to the address.
	RegistrationInvite Registration = "invite"
	// RegistrationClosed: nobody may register.
	RegistrationClosed Registration = "closed"
)

// ParseRegistration reads a policy; "" is RegistrationOpen.
func ParseRegistration(s string) (Registration, error) {
	switch r := Registration(s); r {
	case "":
		return RegistrationOpen, nil
	case RegistrationOpen, RegistrationInvite, RegistrationClosed:
		return r, nil
	}
	return "", fmt.Errorf("%q is not open, invite or closed", s)
}

// The refusals of a registration the policy does not allow.
var (
	ErrRegistrationClosed error = &ForbiddenError{"registration is closed on this server: an operator creates accounts (switchboard admin create-user)"}
	ErrInviteRequired     error = &ForbiddenError{"registration needs an invite on this server: send the invite token you were given as \"invite\""}
	ErrInviteInvalid      error = &ForbiddenError{"this invite is unknown, used, revoked or expired, or it was sent to another address"}
	errNoInvites          error = &ForbiddenError{"registration needs an invite on this server, and this server cannot redeem invites yet"}
)

// InviteRedeemer accepts an invite for an account being registered, in
// the transaction that creates it, so an invite is used exactly when an
// account is made with it. It returns ErrInviteInvalid (or an error that
// wraps it) when the token does not admit that address.
type InviteRedeemer interface {
	RedeemInvite(ctx context.Context, tx pgx.Tx, token, email, userID string) error
}

// NewAccount is an account Register makes: email normalised
// (NormalizeEmail), password hashed (Passwords.Hash), and the invite token
// the person was given ("" for none).
type NewAccount struct {
	Email, PasswordHash, Invite string
}

// Registrar creates accounts by registration under a policy.
type Registrar struct {
	Policy Registration
	// Invites redeems invite tokens; nil refuses every registration in
	// invite mode.
	Invites InviteRedeemer
}

// Allowed says whether a registration with or without an invite may even
// be tried, before any hashing: ErrRegistrationClosed, ErrInviteRequired.
func (r Registrar) Allowed(withInvite bool) error {
	switch {
	case r.Policy == RegistrationClosed:
		return ErrRegistrationClosed
	case r.Policy == RegistrationInvite && !withInvite:
		return ErrInviteRequired
	}
	return nil
}

// Register creates the account if the policy allows it: in invite mode the
// invite is redeemed in the same transaction (an invite that does not
// admit the address leaves nothing behind). An invite sent where
// registration is open is not looked at. A taken address is ErrEmailTaken.
func (r Registrar) Register(ctx context.Context, q db.DB, a NewAccount) (User, error) {
	if err := r.Allowed(a.Invite != ""); err != nil {
		return User{}, err
	}
	if r.Policy != RegistrationInvite {
		return CreateUser(ctx, q, a.Email, a.PasswordHash)
	}
	if r.Invites == nil {
		return User{}, errNoInvites
	}
	var u User
	err := pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		var err error
		if u, err = CreateUser(ctx, tx, a.Email, a.PasswordHash); err != nil {
			return err
		}
		return r.Invites.RedeemInvite(ctx, tx, a.Invite, a.Email, u.ID)
	})
	return u, err
}
