package accounts

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchboard/switchboard/infra/db"
)

// MaxPasswordBytes is bcrypt's limit: it reads no further.
const MaxPasswordBytes = 72

// CheckNewPassword refuses a password bcrypt cannot hash whole. The API's
// schema asks for at least 8 characters; characters are not bytes, so the
// byte limit is checked here.
func CheckNewPassword(password string) error {
	if len(password) > MaxPasswordBytes {
		return fmt.Errorf("expected at most %d bytes (bcrypt's limit); this password is %d", MaxPasswordBytes, len(password))
	}
	return nil
}

// HashPassword hashes a new password with bcrypt at cost (0:
// bcrypt.DefaultCost).
func HashPassword(password string, cost int) (string, error) {
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(hash), nil
}

// dummyHash is compared against when the email is unknown, so a login takes
// as long whether or not the account exists.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("switchboard-dummy-password"), bcrypt.DefaultCost)

// Authenticate finds the enabled account with that email and password, or
// refuses with ErrWrongPassword (which does not say whether the address or
// the password was wrong) or ErrAccountDisabled. An unknown or
// unnormalisable address costs a bcrypt comparison too, so a login takes as
// long whether or not the account exists.
func Authenticate(ctx context.Context, q db.DB, email, password string) (User, error) {
	var u User
	hash, err := "", ErrUserNotFound
	if norm, nerr := NormalizeEmail(email); nerr == nil {
		u, hash, err = userWithHash(ctx, q, norm)
	}
	switch {
	case errors.Is(err, ErrUserNotFound):
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
		return User{}, ErrWrongPassword
	case err != nil:
		return User{}, fmt.Errorf("authenticate: %w", err)
	case bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) != nil:
		return User{}, ErrWrongPassword
	case u.Disabled:
		return User{}, ErrAccountDisabled
	}
	return u, nil
}
