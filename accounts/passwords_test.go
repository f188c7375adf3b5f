package accounts_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

func TestCheckNewPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		password string
		ok       bool
	}{
		{strings.Repeat("x", 72), true},
		{strings.Repeat("é", 36), true}, // 72 bytes
		{strings.Repeat("x", 73), false},
		{strings.Repeat("é", 37), false}, // 37 characters, 74 bytes
		{"1234567", false},
		{"éééééééé", true}, // 8 characters, 16 bytes
		{"", false},
	} {
		if err := accounts.CheckNewPassword(tc.password); (err == nil) != tc.ok {
			t.Errorf("CheckNewPassword(%d bytes) = %v, want ok %v", len(tc.password), err, tc.ok)
		}
	}
}

func TestHashPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cost, want int }{{4, 4}, {0, bcrypt.DefaultCost}} {
		hash, err := accounts.NewPasswords(accounts.PasswordOptions{Cost: tc.cost}).Hash(context.Background(), "correct horse")
		if err != nil {
			t.Fatal(err)
		}
		if cost, err := bcrypt.Cost([]byte(hash)); err != nil || cost != tc.want {
			t.Errorf("cost %d: hashed at %d (%v), want %d", tc.cost, cost, err, tc.want)
		}
		if bcrypt.CompareHashAndPassword([]byte(hash), []byte("correct horse")) != nil {
			t.Errorf("cost %d: the hash does not match its password", tc.cost)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	passwords := accounts.NewPasswords(accounts.PasswordOptions{Cost: 4})
	hash, err := passwords.Hash(ctx, "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	tx := dbtest.NewTx(t)
	user := dbtest.User(t, tx, &dbtest.UserOpts{Email: "login@example.com", PasswordHash: hash})
	dbtest.User(t, tx, &dbtest.UserOpts{Email: "off@example.com", PasswordHash: hash, Disabled: true})

	if u, err := passwords.Authenticate(ctx, tx, " LOGIN@example.com", "correct horse"); err != nil || u.ID != user.ID {
		t.Fatalf("right password: %+v, %v", u, err)
	}
	for _, tc := range []struct {
		name, email, password string
		want                  error
	}{
		{"wrong password", "login@example.com", "wrong horse", accounts.ErrWrongPassword},
		{"unknown address", "nobody@example.com", "correct horse", accounts.ErrWrongPassword},
		{"address that does not normalise", "opſ@example.com", "correct horse", accounts.ErrWrongPassword},
		{"disabled", "off@example.com", "correct horse", accounts.ErrAccountDisabled},
		{"disabled, wrong password: says nothing of the account", "off@example.com", "wrong horse", accounts.ErrWrongPassword},
	} {
		if _, err := passwords.Authenticate(ctx, tx, tc.email, tc.password); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
