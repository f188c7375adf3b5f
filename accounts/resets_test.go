package accounts_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

// account inserts an account whose password is "correct horse" (cost 4).
func account(t *testing.T, q db.DB, p *accounts.Passwords) dbtest.UserRow {
	t.Helper()
	hash, err := p.Hash(context.Background(), "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	return dbtest.User(t, q, &dbtest.UserOpts{PasswordHash: hash})
}

func TestChangePassword(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := accounts.NewPasswords(accounts.PasswordOptions{Cost: 4})

	t.Run("sets the password and ends every session", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		row := account(t, tx, p)
		link, _, err := accounts.NewPasswordReset(ctx, tx, row.ID)
		if err != nil {
			t.Fatal(err)
		}
		u, err := p.ChangePassword(ctx, tx, row.ID, "correct horse", "battery staple")
		if err != nil || u.ID != row.ID || u.TokenGeneration != 1 {
			t.Fatalf("ChangePassword = %+v, %v", u, err)
		}
		if _, err := p.Authenticate(ctx, tx, row.Email, "battery staple"); err != nil {
			t.Fatalf("login with the new password: %v", err)
		}
		if _, err := p.Authenticate(ctx, tx, row.Email, "correct horse"); err != accounts.ErrWrongPassword {
			t.Fatalf("login with the old password: %v", err)
		}
		if _, err := accounts.CheckSession(ctx, tx, accounts.Session{UserID: row.ID, TokenID: uuid.NewString()}, ""); err != accounts.ErrSessionsEnded {
			t.Fatalf("a token from before: %v", err)
		}
		if _, err := p.ResetPassword(ctx, tx, link, "another one"); err != accounts.ErrResetLinkInvalid {
			t.Fatalf("a reset link from before the change: %v", err)
		}
	})

	t.Run("refusals change nothing", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		row := account(t, tx, p)
		var forbidden *accounts.ForbiddenError
		if _, err := p.ChangePassword(ctx, tx, row.ID, "wrong horse", "battery staple"); err != accounts.ErrWrongCurrentPassword || !errors.As(err, &forbidden) {
			t.Fatalf("wrong current password: %v", err)
		}
		if _, err := p.ChangePassword(ctx, tx, row.ID, "correct horse", "short"); err == nil || !strings.Contains(err.Error(), "at least 8") {
			t.Fatalf("short new password: %v", err)
		}
		if _, err := p.ChangePassword(ctx, tx, uuid.NewString(), "correct horse", "battery staple"); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Fatalf("unknown account: %v", err)
		}
		if _, err := p.Authenticate(ctx, tx, row.Email, "correct horse"); err != nil {
			t.Fatalf("the password after the refusals: %v", err)
		}
		if gen, _ := accounts.TokenGeneration(ctx, tx, row.ID); gen != 0 {
			t.Fatalf("generation %d after refusals", gen)
		}
	})
}

func TestResetPassword(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := accounts.NewPasswords(accounts.PasswordOptions{Cost: 4})

	t.Run("a link works once, ends every session and voids the other links", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		row := account(t, tx, p)
		link, expires, err := accounts.NewPasswordReset(ctx, tx, row.ID)
		if err != nil || !strings.HasPrefix(link, accounts.ResetTokenPrefix) || time.Until(expires) > accounts.ResetTTL || time.Until(expires) < accounts.ResetTTL-time.Minute {
			t.Fatalf("NewPasswordReset = %q, %v, %v", link, expires, err)
		}
		other, _, _ := accounts.NewPasswordReset(ctx, tx, row.ID)
		u, err := p.ResetPassword(ctx, tx, link, "battery staple")
		if err != nil || u.ID != row.ID || u.TokenGeneration != 1 {
			t.Fatalf("ResetPassword = %+v, %v", u, err)
		}
		if _, err := p.Authenticate(ctx, tx, row.Email, "battery staple"); err != nil {
			t.Fatalf("login with the new password: %v", err)
		}
		for name, token := range map[string]string{"the used link": link, "another link of the account": other} {
			if _, err := p.ResetPassword(ctx, tx, token, "yet another"); err != accounts.ErrResetLinkInvalid {
				t.Fatalf("%s: %v", name, err)
			}
		}
	})

	t.Run("bad links and passwords change nothing", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		row := account(t, tx, p)
		link, _, _ := accounts.NewPasswordReset(ctx, tx, row.ID)
		expired, _, _ := accounts.NewPasswordReset(ctx, tx, row.ID)
		if _, err := tx.Exec(ctx, `UPDATE password_resets SET expires_at = now() - interval '1 second' WHERE user_id = $1 AND token_hash <> sha256($2)`, row.ID, link); err != nil {
			t.Fatal(err)
		}
		for name, token := range map[string]string{
			"expired": expired, "unknown": accounts.ResetTokenPrefix + strings.Repeat("A", 43),
			"malformed": "sbr_!", "empty": "", "another kind of token": "sbk_" + strings.Repeat("A", 43),
		} {
			if _, err := p.ResetPassword(ctx, tx, token, "battery staple"); err != accounts.ErrResetLinkInvalid {
				t.Errorf("%s: %v", name, err)
			}
		}
		if _, err := p.ResetPassword(ctx, tx, link, "short"); err == nil || errors.Is(err, accounts.ErrResetLinkInvalid) {
			t.Fatalf("short password: %v", err)
		}
		if _, err := p.Authenticate(ctx, tx, row.Email, "correct horse"); err != nil {
			t.Fatalf("the password after the refusals: %v", err)
		}
		if _, err := p.ResetPassword(ctx, tx, link, "battery staple"); err != nil {
			t.Fatalf("the link after the refusals: %v", err)
		}
	})

	t.Run("an unknown account has no link", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		if _, _, err := accounts.NewPasswordReset(ctx, tx, uuid.NewString()); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Fatalf("%v", err)
		}
	})
}

// TestResetPasswordConcurrently: one link, many resets at once on separate
// connections: exactly one sets its password.
func TestResetPasswordConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := accounts.NewPasswords(accounts.PasswordOptions{Cost: 4, Concurrency: 16})
	pool := dbtest.NewPool(t)
	row := account(t, pool, p)
	link, _, err := accounts.NewPasswordReset(ctx, pool, row.ID)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, err := p.ResetPassword(ctx, pool, link, "password number "+string(rune('a'+i)))
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case err != accounts.ErrResetLinkInvalid:
			t.Fatalf("a racing reset: %v", err)
		}
	}
	if gen, _ := accounts.TokenGeneration(ctx, pool, row.ID); won != 1 || gen != 1 {
		t.Fatalf("%d resets won, generation %d; want 1 and 1", won, gen)
	}
}
