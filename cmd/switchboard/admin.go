package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/db"
)

// adminArgs is one `switchboard admin` invocation.
type adminArgs struct {
	verb  string // grant, revoke, disable, enable, list
	email string
}

func parseAdminArgs(args []string) (adminArgs, error) {
	if len(args) == 0 {
		return adminArgs{}, errors.New("missing subcommand: grant, revoke, disable, enable or list")
	}
	a := adminArgs{verb: args[0]}
	switch a.verb {
	case "list":
		if len(args) != 1 {
			return adminArgs{}, errors.New("list takes no arguments")
		}
		return a, nil
	case "grant", "revoke", "disable", "enable":
		if len(args) != 2 || args[1] == "" {
			return adminArgs{}, fmt.Errorf("usage: switchboard admin %s <email>", a.verb)
		}
		a.email = args[1]
		return a, nil
	}
	return adminArgs{}, fmt.Errorf("unknown subcommand %q: use grant, revoke, disable, enable or list", a.verb)
}

// change is what a verb does to an account.
func (a adminArgs) change() accounts.UserChange {
	admin, user := accounts.RoleAdmin, accounts.RoleUser
	yes, no := true, false
	switch a.verb {
	case "grant":
		return accounts.UserChange{Role: &admin}
	case "revoke":
		return accounts.UserChange{Role: &user}
	case "disable":
		return accounts.UserChange{Disabled: &yes}
	}
	return accounts.UserChange{Disabled: &no}
}

// adminCommand runs `switchboard admin …` against the configured database
// (DATABASE_URL, or the embedded one in the data directory: started for the
// command, or attached to when a replica runs it). Every replica reads roles
// and account state on each request, so a change counts at once everywhere.
func adminCommand(ctx context.Context, cfg config.Config, logger *slog.Logger, args []string, out io.Writer) error {
	a, err := parseAdminArgs(args)
	if err != nil {
		return err
	}
	return withDatabase(ctx, cfg, logger, func(pool *pgxpool.Pool) error {
		if a.verb == "list" {
			return listAdmins(ctx, pool, out)
		}
		u, err := accounts.UpdateUserByEmail(ctx, pool, a.email, a.change())
		if errors.Is(err, accounts.ErrUserNotFound) {
			return fmt.Errorf("no account has the email %q: register it first (POST /v1/auth/register), then run this again", a.email)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s %s: role %s, disabled %t\n", u.Email, u.ID, u.Role, u.Disabled)
		return nil
	})
}

func listAdmins(ctx context.Context, q db.DB, out io.Writer) error {
	admins, err := accounts.Admins(ctx, q)
	if err != nil {
		return err
	}
	for _, u := range admins {
		state := ""
		if u.Disabled {
			state = " (disabled)"
		}
		fmt.Fprintf(out, "%s %s%s\n", u.Email, u.ID, state)
	}
	if len(admins) == 0 {
		fmt.Fprintln(out, "no admins: run switchboard admin grant <email> for a registered account")
	}
	return nil
}
