package accounts

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchboard/switchboard/infra/db"
)

// MaxPasswordBytes is bcrypt's limit: it reads no further.
const MaxPasswordBytes = 72

// MinPasswordChars is the shortest password an account may set.
const MinPasswordChars = 8

// CheckNewPassword refuses a password an account may not set: shorter than
// MinPasswordChars characters, or more bytes than bcrypt hashes whole
// (characters are not bytes, so both are checked here).
func CheckNewPassword(password string) error {
	if n := len([]rune(password)); n < MinPasswordChars {
		return fmt.Errorf("expected at least %d characters; this password has %d", MinPasswordChars, n)
	}
	if len(password) > MaxPasswordBytes {
		return fmt.Errorf("expected at most %d bytes (bcrypt's limit); this password is %d", MaxPasswordBytes, len(password))
	}
	return nil
}

// ErrHashingBusy refuses a password check or hash when every hashing slot
// of this process stayed busy for the whole wait: bcrypt is meant to be
// slow, and without a bound a burst of logins (from many addresses, so no
// per-address limit stops it) would take every CPU of the replica.
var ErrHashingBusy = errors.New("too many password checks at once on this server; retry in a second")

// DefaultHashWait is how long a password check waits for a hashing slot
// before ErrHashingBusy.
const DefaultHashWait = time.Second

// PasswordOptions configure Passwords; zero values mean the defaults.
type PasswordOptions struct {
	// Cost of bcrypt hashes; default bcrypt.DefaultCost.
	Cost int
	// Concurrency is how many hashes and comparisons run at once in this
	// process; default the number of CPUs Go uses (at least 2).
	Concurrency int
	// Wait for a slot before ErrHashingBusy; default DefaultHashWait.
	Wait time.Duration
}

// Passwords hashes and checks passwords with bcrypt at one cost, at most
// Concurrency at once per process. A login for an address without an
// account compares against a dummy hash of the same cost, so it takes as
// long as a login with a wrong password.
type Passwords struct {
	cost  int
	dummy []byte
	slots chan struct{}
	wait  time.Duration
}

// NewPasswords makes the password hasher of one process.
func NewPasswords(o PasswordOptions) *Passwords {
	cost := cmp.Or(o.Cost, bcrypt.DefaultCost)
	n := cmp.Or(o.Concurrency, max(runtime.GOMAXPROCS(0), 2))
	return &Passwords{cost: cost, dummy: dummyHash(cost), slots: make(chan struct{}, n), wait: cmp.Or(o.Wait, DefaultHashWait)}
}

// dummyHash is a bcrypt hash at cost that no password matches (of a
// random secret, forgotten). bcrypt's work depends only on the cost written
// in the hash, so a hash made cheaply at cost 4 with its cost field
// rewritten costs a comparison as much as a real hash of that cost.
func dummyHash(cost int) []byte {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)                                                                                  // never fails (crypto/rand)
	h, _ := bcrypt.GenerateFromPassword([]byte(base64.RawURLEncoding.EncodeToString(secret)), bcrypt.MinCost) // "$2a$04$" + salt and hash
	return fmt.Appendf(nil, "$2a$%02d$%s", cost, h[7:])
}

// InFlight is how many hashes or comparisons run now.
func (p *Passwords) InFlight() int { return len(p.slots) }

// Hash hashes a new password; ErrHashingBusy when no slot came free.
func (p *Passwords) Hash(ctx context.Context, password string) (string, error) {
	var hash []byte
	err := p.withSlot(ctx, func() (err error) {
		hash, err = bcrypt.GenerateFromPassword([]byte(password), p.cost)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(hash), nil
}

// matches reports whether password matches hash; ErrHashingBusy when no
// slot came free.
func (p *Passwords) matches(ctx context.Context, hash []byte, password string) (bool, error) {
	var ok bool
	err := p.withSlot(ctx, func() error {
		ok = bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
		return nil
	})
	return ok, err
}

// withSlot runs fn holding a hashing slot, waiting for one at most p.wait.
func (p *Passwords) withSlot(ctx context.Context, fn func() error) error {
	select {
	case p.slots <- struct{}{}:
	default:
		t := time.NewTimer(p.wait)
		defer t.Stop()
		select {
		case p.slots <- struct{}{}:
		case <-t.C:
			return ErrHashingBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() { <-p.slots }()
	return fn()
}

// Authenticate finds the enabled account with that email and password, or
// refuses with ErrWrongPassword (which does not say whether the address or
// the password was wrong) or ErrAccountDisabled. An unknown or
// unnormalisable address costs a bcrypt comparison at the same cost too,
// so a login takes as long whether or not the account exists.
func (p *Passwords) Authenticate(ctx context.Context, q db.DB, email, password string) (User, error) {
	var u User
	hash, err := "", ErrUserNotFound
	if norm, nerr := NormalizeEmail(email); nerr == nil {
		u, hash, err = userWithHash(ctx, q, norm)
	}
	switch {
	case errors.Is(err, ErrUserNotFound):
		if _, err := p.matches(ctx, p.dummy, password); err != nil {
			return User{}, err
		}
		return User{}, ErrWrongPassword
	case err != nil:
		return User{}, fmt.Errorf("authenticate: %w", err)
	}
	ok, err := p.matches(ctx, []byte(hash), password)
	switch {
	case err != nil:
		return User{}, err
	case !ok:
		return User{}, ErrWrongPassword
	case u.Disabled:
		return User{}, ErrAccountDisabled
	}
	return u, nil
}
