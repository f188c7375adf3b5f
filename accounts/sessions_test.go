package accounts_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

func TestCheckSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a session of an enabled account answers its stored role", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		u := dbtest.User(t, tx, &dbtest.UserOpts{Role: accounts.RoleAdmin})
		if a, err := accounts.CheckSession(ctx, tx, accounts.Session{UserID: u.ID, TokenID: uuid.NewString()}, ""); err != nil || a.Role != accounts.RoleAdmin || a.ProjectRole != accounts.ProjectOwner {
			t.Fatalf("CheckSession = %+v, %v", a, err)
		}
	})

	t.Run("refusals, each with its reason", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		u := dbtest.User(t, tx, nil)
		off := dbtest.User(t, tx, &dbtest.UserOpts{Disabled: true})
		ended := accounts.Session{UserID: u.ID, TokenID: uuid.NewString()}
		if err := accounts.EndSession(ctx, tx, ended, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := accounts.EndSession(ctx, tx, ended, time.Now().Add(time.Hour)); err != nil {
			t.Fatalf("ending a session twice: %v", err)
		}
		for _, tc := range []struct {
			name string
			s    accounts.Session
			want error
		}{
			{"signed out", ended, accounts.ErrSessionEnded},
			{"another generation", accounts.Session{UserID: u.ID, TokenID: uuid.NewString(), Generation: 1}, accounts.ErrSessionsEnded},
			{"disabled", accounts.Session{UserID: off.ID, TokenID: uuid.NewString()}, accounts.ErrAccountDisabled},
			{"deleted", accounts.Session{UserID: uuid.NewString(), TokenID: uuid.NewString()}, accounts.ErrAccountGone},
		} {
			var refused *accounts.RefusedError
			if _, err := accounts.CheckSession(ctx, tx, tc.s, ""); err != tc.want || !errors.As(err, &refused) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
		}
		if _, err := accounts.CheckSession(ctx, tx, accounts.Session{UserID: u.ID, TokenID: uuid.NewString()}, ""); err != nil {
			t.Fatalf("another token of the account is still valid: %v", err)
		}
	})

	t.Run("EndSessions ends every token of the generation before", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		u := dbtest.User(t, tx, nil)
		old := accounts.Session{UserID: u.ID, TokenID: uuid.NewString()}
		gen, err := accounts.EndSessions(ctx, tx, u.ID)
		if err != nil || gen != 1 {
			t.Fatalf("EndSessions = %d, %v", gen, err)
		}
		if _, err := accounts.CheckSession(ctx, tx, old, ""); err != accounts.ErrSessionsEnded {
			t.Fatalf("a token of generation 0: %v", err)
		}
		if _, err := accounts.CheckSession(ctx, tx, accounts.Session{UserID: u.ID, TokenID: uuid.NewString(), Generation: gen}, ""); err != nil {
			t.Fatalf("a token of the new generation: %v", err)
		}
		if stored, err := accounts.TokenGeneration(ctx, tx, u.ID); err != nil || stored != 1 {
			t.Fatalf("TokenGeneration = %d, %v", stored, err)
		}
		if _, err := accounts.EndSessions(ctx, tx, uuid.NewString()); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Fatalf("unknown account: %v", err)
		}
	})

	t.Run("a token id that is not a UUID is refused before any read", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		u := dbtest.User(t, tx, nil)
		if _, err := accounts.CheckSession(ctx, tx, accounts.Session{UserID: u.ID, TokenID: "x"}, ""); err == nil {
			t.Fatal("accepted")
		}
	})
}

func TestTokenIDOf(t *testing.T) {
	t.Parallel()
	a, b := accounts.TokenIDOf("token-a"), accounts.TokenIDOf("token-b")
	if uuid.Validate(a) != nil || a == b || a != accounts.TokenIDOf("token-a") {
		t.Fatalf("TokenIDOf: %q, %q", a, b)
	}
}

func TestPruneEndedSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.NewTx(t)
	u := dbtest.User(t, tx, nil)
	live := accounts.Session{UserID: u.ID, TokenID: uuid.NewString()}
	dead := accounts.Session{UserID: u.ID, TokenID: uuid.NewString()}
	for s, exp := range map[accounts.Session]time.Time{live: time.Now().Add(time.Hour), dead: time.Now().Add(-time.Hour)} {
		if err := accounts.EndSession(ctx, tx, s, exp); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := accounts.NewPasswordReset(ctx, tx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := accounts.NewPasswordReset(ctx, tx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE password_resets SET expires_at = now() - interval '1 second' WHERE token_hash = (SELECT token_hash FROM password_resets LIMIT 1)`); err != nil {
		t.Fatal(err)
	}
	n, err := accounts.PruneEndedSessions(ctx, tx)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want the expired token and link", n, err)
	}
	if _, err := accounts.CheckSession(ctx, tx, live, ""); err != accounts.ErrSessionEnded {
		t.Fatalf("the unexpired signed-out token after the prune: %v", err)
	}
	var links int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM password_resets`).Scan(&links); err != nil || links != 1 {
		t.Fatalf("%d links left (%v), want 1", links, err)
	}
}
