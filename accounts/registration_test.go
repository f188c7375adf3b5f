package accounts_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

func TestParseRegistration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want accounts.Registration
		ok   bool
	}{
		{"", accounts.RegistrationOpen, true},
		{"open", accounts.RegistrationOpen, true},
		{"invite", accounts.RegistrationInvite, true},
		{"closed", accounts.RegistrationClosed, true},
		{"Closed", "", false},
		{"invites", "", false},
	} {
		got, err := accounts.ParseRegistration(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseRegistration(%q) = %q, %v", tc.in, got, err)
		}
	}
}

// refusingRedeemer stands for an invite store that finds no invite: it
// checks that a refused invite leaves no account behind. The invite path
// with real invites is tested where invites are stored.
type refusingRedeemer struct{}

func (refusingRedeemer) RedeemInvite(context.Context, pgx.Tx, string, string, string) error {
	return accounts.ErrInviteInvalid
}

func TestRegister(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exists := func(t *testing.T, q db.DB, email string) bool {
		t.Helper()
		_, err := accounts.UserByEmail(ctx, q, email)
		return err == nil
	}

	t.Run("open: an account, whatever invite is sent", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		r := accounts.Registrar{Policy: accounts.RegistrationOpen}
		for _, a := range []accounts.NewAccount{{Email: "open1@example.com", PasswordHash: "x"}, {Email: "open2@example.com", PasswordHash: "x", Invite: "sbi_whatever"}} {
			if u, err := r.Register(ctx, tx, a); err != nil || u.Email != a.Email {
				t.Fatalf("register %+v: %+v, %v", a, u, err)
			}
		}
	})

	t.Run("closed and invite without one refuse, and make nothing", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		for _, tc := range []struct {
			r    accounts.Registrar
			a    accounts.NewAccount
			want error
		}{
			{accounts.Registrar{Policy: accounts.RegistrationClosed}, accounts.NewAccount{Email: "c@example.com", PasswordHash: "x"}, accounts.ErrRegistrationClosed},
			{accounts.Registrar{Policy: accounts.RegistrationClosed}, accounts.NewAccount{Email: "c@example.com", PasswordHash: "x", Invite: "sbi_x"}, accounts.ErrRegistrationClosed},
			{accounts.Registrar{Policy: accounts.RegistrationInvite, Invites: refusingRedeemer{}}, accounts.NewAccount{Email: "c@example.com", PasswordHash: "x"}, accounts.ErrInviteRequired},
			{accounts.Registrar{Policy: accounts.RegistrationInvite, Invites: refusingRedeemer{}}, accounts.NewAccount{Email: "c@example.com", PasswordHash: "x", Invite: "sbi_x"}, accounts.ErrInviteInvalid},
		} {
			var forbidden *accounts.ForbiddenError
			if _, err := tc.r.Register(ctx, tx, tc.a); !errors.Is(err, tc.want) || !errors.As(err, &forbidden) {
				t.Errorf("%s with invite %q: %v, want %v", tc.r.Policy, tc.a.Invite, err, tc.want)
			}
		}
		if exists(t, tx, "c@example.com") {
			t.Fatal("a refused registration made an account")
		}
	})

	t.Run("invite mode without an invite store refuses every registration", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		r := accounts.Registrar{Policy: accounts.RegistrationInvite}
		var forbidden *accounts.ForbiddenError
		if _, err := r.Register(ctx, tx, accounts.NewAccount{Email: "i@example.com", PasswordHash: "x", Invite: "sbi_x"}); !errors.As(err, &forbidden) {
			t.Fatalf("%v, want a refusal", err)
		}
		if exists(t, tx, "i@example.com") {
			t.Fatal("made an account")
		}
	})

	t.Run("Allowed decides before any hashing", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			p      accounts.Registration
			invite bool
			want   error
		}{
			{accounts.RegistrationOpen, false, nil}, {accounts.RegistrationInvite, true, nil},
			{accounts.RegistrationInvite, false, accounts.ErrInviteRequired}, {accounts.RegistrationClosed, true, accounts.ErrRegistrationClosed},
		} {
			if err := (accounts.Registrar{Policy: tc.p}).Allowed(tc.invite); err != tc.want {
				t.Errorf("%s, invite %v: %v, want %v", tc.p, tc.invite, err, tc.want)
			}
		}
	})
}
