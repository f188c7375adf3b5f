package accounts_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/db"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
)

func TestCreateUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a new account is a user", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		u, err := accounts.CreateUser(ctx, tx, "new@example.com", "hash")
		if err != nil {
			t.Fatal(err)
		}
		if uuid.Validate(u.ID) != nil || u.Email != "new@example.com" || u.Role != accounts.RoleUser || u.Disabled || u.CreatedAt.IsZero() {
			t.Fatalf("created %+v", u)
		}
	})

	t.Run("a taken address is ErrEmailTaken", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		taken := dbtest.User(t, tx, nil)
		_, err := accounts.CreateUser(ctx, tx, taken.Email, "hash")
		if !errors.Is(err, accounts.ErrEmailTaken) || !errors.Is(err, db.ErrConflict) {
			t.Fatalf("second account with %s: %v, want ErrEmailTaken (a conflict)", taken.Email, err)
		}
	})
}

func TestUserLookups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("by id", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		row := dbtest.User(t, tx, &dbtest.UserOpts{Role: accounts.RoleAdmin, Disabled: true})
		u, err := accounts.UserByID(ctx, tx, row.ID)
		if err != nil || u.ID != row.ID || u.Email != row.Email || u.Role != accounts.RoleAdmin || !u.Disabled {
			t.Fatalf("UserByID = %+v, %v; inserted %+v", u, err, row)
		}
		if _, err := accounts.UserByID(ctx, tx, uuid.NewString()); !errors.Is(err, accounts.ErrUserNotFound) || !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("unknown id: %v, want ErrUserNotFound", err)
		}
	})

	t.Run("by email, normalised first", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		row := dbtest.User(t, tx, &dbtest.UserOpts{Email: "findme@example.com"})
		if u, err := accounts.UserByEmail(ctx, tx, " FindMe@Example.COM "); err != nil || u.ID != row.ID {
			t.Fatalf("UserByEmail = %+v, %v; want %s", u, err, row.ID)
		}
		if _, err := accounts.UserByEmail(ctx, tx, "nobody@example.com"); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Fatalf("unknown address: %v", err)
		}
	})

	t.Run("an address from before normalisation is matched exactly", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		legacy := dbtest.User(t, tx, &dbtest.UserOpts{Email: "opſ@example.com", Disabled: true})
		dbtest.User(t, tx, &dbtest.UserOpts{Email: "ops@example.com"})
		if u, err := accounts.UserByEmail(ctx, tx, "opſ@example.com"); err != nil || u.ID != legacy.ID {
			t.Fatalf("legacy address: %+v, %v; want %s", u, err, legacy.ID)
		}
		if _, err := accounts.UserByEmail(ctx, tx, "OPſ@example.com"); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Fatalf("another spelling of a legacy address: %v, want ErrUserNotFound", err)
		}
	})
}

func TestUpdateUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, user, yes, no := accounts.RoleAdmin, accounts.RoleUser, true, false

	t.Run("grant, disable, enable, revoke", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		row := dbtest.User(t, tx, nil)
		for _, step := range []struct {
			change   accounts.UserChange
			role     string
			disabled bool
		}{
			{accounts.UserChange{Role: &admin}, admin, false},
			{accounts.UserChange{Disabled: &yes}, admin, true},
			{accounts.UserChange{Disabled: &no}, admin, false},
			{accounts.UserChange{Role: &user, Disabled: &yes}, user, true},
		} {
			u, err := accounts.UpdateUser(ctx, tx, row.ID, step.change)
			if err != nil || u.ID != row.ID || u.Role != step.role || u.Disabled != step.disabled {
				t.Fatalf("after %+v: %+v, %v; want role %s disabled %v", step.change, u, err, step.role, step.disabled)
			}
		}
	})

	t.Run("no change writes nothing", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		row := dbtest.User(t, tx, nil)
		if _, err := tx.Exec(ctx, `UPDATE users SET updated_at = '2001-01-01' WHERE id = $1`, row.ID); err != nil {
			t.Fatal(err)
		}
		for _, c := range []accounts.UserChange{{}, {Role: &user, Disabled: &no}} {
			if u, err := accounts.UpdateUser(ctx, tx, row.ID, c); err != nil || u.Email != row.Email {
				t.Fatalf("change %+v: %+v, %v", c, u, err)
			}
		}
		var updated time.Time
		if err := tx.QueryRow(ctx, `SELECT updated_at FROM users WHERE id = $1`, row.ID).Scan(&updated); err != nil || updated.Year() != 2001 {
			t.Fatalf("updated_at = %v (%v), want it left alone", updated, err)
		}
	})

	t.Run("by email, normalised first", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		row := dbtest.User(t, tx, &dbtest.UserOpts{Email: "someone@example.com"})
		u, err := accounts.UpdateUserByEmail(ctx, tx, "SomeOne@example.com", accounts.UserChange{Role: &admin})
		if err != nil || u.ID != row.ID || u.Role != admin {
			t.Fatalf("UpdateUserByEmail = %+v, %v", u, err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		tx := dbtest.NewTx(t)
		row := dbtest.User(t, tx, nil)
		root := "root"
		if _, err := accounts.UpdateUser(ctx, tx, row.ID, accounts.UserChange{Role: &root}); !errors.Is(err, accounts.ErrInvalidRole) {
			t.Fatalf("role root: %v", err)
		}
		if _, err := accounts.UpdateUser(ctx, tx, uuid.NewString(), accounts.UserChange{Role: &admin}); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
		if _, err := accounts.UpdateUserByEmail(ctx, tx, "nobody@example.com", accounts.UserChange{Role: &admin}); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Fatalf("unknown address: %v", err)
		}
		if _, err := accounts.UpdateUserByEmail(ctx, tx, "opſ@example.com", accounts.UserChange{Role: &admin}); err == nil || errors.Is(err, accounts.ErrUserNotFound) {
			t.Fatalf("an address that does not normalise: %v, want the reason", err)
		}
	})
}

func TestActiveRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.NewTx(t)
	admin := dbtest.User(t, tx, &dbtest.UserOpts{Role: accounts.RoleAdmin})
	disabled := dbtest.User(t, tx, &dbtest.UserOpts{Role: accounts.RoleAdmin, Disabled: true})
	if role, err := accounts.ActiveRole(ctx, tx, admin.ID); err != nil || role != accounts.RoleAdmin {
		t.Fatalf("enabled admin: %q, %v", role, err)
	}
	var refused *accounts.RefusedError
	if _, err := accounts.ActiveRole(ctx, tx, disabled.ID); err != accounts.ErrAccountDisabled || !errors.As(err, &refused) {
		t.Fatalf("disabled: %v, want ErrAccountDisabled", err)
	}
	if _, err := accounts.ActiveRole(ctx, tx, uuid.NewString()); err != accounts.ErrAccountGone || !errors.As(err, &refused) {
		t.Fatalf("deleted: %v, want ErrAccountGone", err)
	}
}

func TestAdmins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.NewTx(t)
	if admins, err := accounts.Admins(ctx, tx); err != nil || len(admins) != 0 {
		t.Fatalf("no admins yet: %+v, %v", admins, err)
	}
	newer := dbtest.User(t, tx, &dbtest.UserOpts{Role: accounts.RoleAdmin})
	older := dbtest.User(t, tx, &dbtest.UserOpts{Role: accounts.RoleAdmin, Disabled: true})
	dbtest.User(t, tx, nil)
	if _, err := tx.Exec(ctx, `UPDATE users SET created_at = created_at - interval '1 day' WHERE id = $1`, older.ID); err != nil {
		t.Fatal(err)
	}
	admins, err := accounts.Admins(ctx, tx)
	if err != nil || len(admins) != 2 || admins[0].ID != older.ID || !admins[0].Disabled || admins[1].ID != newer.ID {
		t.Fatalf("Admins = %+v, %v; want %s then %s", admins, err, older.ID, newer.ID)
	}
}

func TestListUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.NewTx(t)
	var ids []string
	for range 5 {
		ids = append(ids, dbtest.User(t, tx, nil).ID)
	}
	slices.Sort(ids) // one transaction: one created_at, so id orders them

	var seen []string
	var after accounts.Position
	for page := 0; ; page++ {
		users, more, err := accounts.ListUsers(ctx, tx, after, 2)
		if err != nil || len(users) == 0 || len(users) > 2 || more != (page < 2) {
			t.Fatalf("page %d: %d users, more %v, %v", page, len(users), more, err)
		}
		for _, u := range users {
			seen = append(seen, u.ID)
		}
		if !more {
			break
		}
		last := users[len(users)-1]
		after = accounts.Position{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	if !slices.Equal(seen, ids) {
		t.Fatalf("listed %v, want %v", seen, ids)
	}

	t.Run("a page after a deleted account goes on", func(t *testing.T) {
		t.Parallel()
		first, _, err := accounts.ListUsers(ctx, tx, accounts.Position{}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM users WHERE id = $1`, first[1].ID); err != nil {
			t.Fatal(err)
		}
		next, more, err := accounts.ListUsers(ctx, tx, accounts.Position{CreatedAt: first[1].CreatedAt, ID: first[1].ID}, 3)
		if err != nil || more || len(next) != 3 || next[0].ID != ids[2] {
			t.Fatalf("after a deleted account: %+v, more %v, %v; want from %s on", next, more, err, ids[2])
		}
	})
}
