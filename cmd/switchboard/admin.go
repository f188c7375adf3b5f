package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/switchboard/accounts"
	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/db"
)

// adminArgs is one `switchboard admin` invocation.
type adminArgs struct {
	verb  string // grant, revoke, disable, enable, list, create-user, reset-password
	email string
}

const adminVerbs = "grant, revoke, disable, enable, list, create-user or reset-password"

func parseAdminArgs(args []string) (adminArgs, error) {
	if len(args) == 0 {
		return adminArgs{}, errors.New("missing subcommand: " + adminVerbs)
	}
	a := adminArgs{verb: args[0]}
	switch a.verb {
	case "list":
		if len(args) != 1 {
			return adminArgs{}, errors.New("list takes no arguments")
		}
		return a, nil
	case "grant", "revoke", "disable", "enable", "create-user", "reset-password":
		if len(args) != 2 || args[1] == "" {
			return adminArgs{}, fmt.Errorf("usage: switchboard admin %s <email>", a.verb)
		}
		a.email = args[1]
		return a, nil
	}
	return adminArgs{}, fmt.Errorf("unknown subcommand %q: use %s", a.verb, adminVerbs)
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
// stdin is the piped standard input (create-user reads the password from
// it), nil when it is a terminal.
func adminCommand(ctx context.Context, cfg config.Config, logger *slog.Logger, args []string, stdin io.Reader, out io.Writer) error {
	a, err := parseAdminArgs(args)
	if err != nil {
		return err
	}
	return withDatabase(ctx, cfg, logger, func(pool *pgxpool.Pool) error {
		switch a.verb {
		case "list":
			return listAdmins(ctx, pool, out)
		case "create-user":
			return createUser(ctx, pool, cfg, a.email, stdin, out)
		case "reset-password":
			return resetLink(ctx, pool, cfg, a.email, out)
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

// createUser makes an account, whatever the registration policy: the
// password is the first line of stdin when it is piped, else generated and
// printed once.
func createUser(ctx context.Context, q db.DB, cfg config.Config, email string, stdin io.Reader, out io.Writer) error {
	norm, err := accounts.NormalizeEmail(email)
	if err != nil {
		return fmt.Errorf("email %q: %w", email, err)
	}
	password, generated, err := newAccountPassword(stdin)
	if err != nil {
		return err
	}
	hash, err := accounts.NewPasswords(accounts.PasswordOptions{Cost: cfg.BcryptCost}).Hash(ctx, password)
	if err != nil {
		return err
	}
	u, err := accounts.CreateUser(ctx, q, norm, hash)
	if errors.Is(err, accounts.ErrEmailTaken) {
		return fmt.Errorf("an account with the email %q exists already: switchboard admin reset-password %s makes a reset link for it", norm, norm)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "created %s %s: role %s\n", u.Email, u.ID, u.Role)
	if generated {
		fmt.Fprintf(out, "password (shown only now): %s\n", password)
	}
	return nil
}

// newAccountPassword is the first line of stdin, checked like any new
// password, or a generated one (24 base64url characters, 144 bits) when
// stdin is a terminal.
func newAccountPassword(stdin io.Reader) (password string, generated bool, err error) {
	if stdin == nil {
		b := make([]byte, 18)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		return base64.RawURLEncoding.EncodeToString(b), true, nil
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", false, fmt.Errorf("read the password from standard input: %w", err)
	}
	password = strings.TrimRight(line, "\r\n")
	if err := accounts.CheckNewPassword(password); err != nil {
		return "", false, fmt.Errorf("the password on standard input: %w", err)
	}
	return password, false, nil
}

// resetLink prints a single-use password reset link for the account,
// valid an hour, to hand to its owner.
func resetLink(ctx context.Context, q db.DB, cfg config.Config, email string, out io.Writer) error {
	u, err := accounts.UserByEmail(ctx, q, email)
	if errors.Is(err, accounts.ErrUserNotFound) {
		return fmt.Errorf("no account has the email %q", email)
	}
	if err != nil {
		return err
	}
	token, expires, err := accounts.NewPasswordReset(ctx, q, u.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "password reset link for %s, valid once until %s:\n%s\n", u.Email, expires.UTC().Format(time.RFC3339), accounts.ResetURL(cfg.ResetLinkBase(), token))
	return nil
}
