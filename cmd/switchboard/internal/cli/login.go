package cli

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/switchboard/switchboard/cmd/switchboard/internal/apiclient"
)

func (a *app) loginCommand() *cobra.Command {
	var (
		email   string
		withKey bool
	)
	c := &cobra.Command{Use: "login", Short: "store a server and an API key for the commands that follow",
		Long: "Sign in to a server (--url, else $SWITCHBOARD_URL) and store an API key for it in\n" +
			"the user's config directory (file mode 0600). With --email (or asked for), the\n" +
			"password is read from standard input, or without echo on a terminal, and a new key\n" +
			"named after this host is made and stored; with --with-api-key an existing key is read\n" +
			"from standard input instead. The project (--project, $SWITCHBOARD_PROJECT) is stored too.",
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.serverSettings()
			if err != nil {
				return err
			}
			if withKey {
				return a.loginWithKey(cmd.Context(), s)
			}
			return a.loginWithPassword(cmd, s, email)
		}}
	c.Flags().StringVar(&email, "email", "", "the account's email (default: asked for)")
	c.Flags().BoolVar(&withKey, "with-api-key", false, "read an existing API key from standard input")
	return c
}

// serverSettings are the server and project without a key (login).
func (a *app) serverSettings() (login, error) {
	stored, err := a.storedLogin()
	if err != nil {
		return login{}, err
	}
	s := login{URL: cmp.Or(a.url, a.io.Getenv(EnvURL), stored.URL), Project: cmp.Or(a.project, a.io.Getenv(EnvProject))}
	if s.URL == "" {
		return s, usageError{fmt.Errorf("which server? give --url or set %s", EnvURL)}
	}
	return s, nil
}

// loginWithKey checks a key read from stdin and stores it.
func (a *app) loginWithKey(ctx context.Context, s login) error {
	key, err := a.line("")
	if err != nil {
		return usageError{fmt.Errorf("read the API key from standard input: %w", err)}
	}
	s.APIKey = key
	cl := &apiclient.Client{BaseURL: s.URL, Token: key, Project: s.Project}
	u, err := cl.Me(ctx)
	if err != nil {
		return err
	}
	return a.saveLogin(s, u.Email)
}

// loginWithPassword signs in, makes a key for this host and stores it.
func (a *app) loginWithPassword(cmd *cobra.Command, s login, email string) error {
	cl, end, err := a.signIn(cmd, s, email)
	if err != nil {
		return err
	}
	defer end()
	host, _ := os.Hostname()
	k, err := cl.CreateAPIKey(cmd.Context(), apiclient.APIKeyCreate{Name: clip("switchboard CLI on "+cmp.Or(host, "this host"), 100)})
	if err != nil {
		return err
	}
	s.APIKey, s.KeyID = k.Secret, k.ID
	u, err := cl.Me(cmd.Context())
	if err != nil {
		return err
	}
	return a.saveLogin(s, u.Email)
}

func (a *app) saveLogin(s login, email string) error {
	path, err := a.storeLogin(s)
	if err != nil {
		return err
	}
	a.say("logged in to %s as %s; the API key %s… is stored in %s", s.URL, email, s.APIKey[:min(12, len(s.APIKey))], path)
	return nil
}

// signIn asks for what it lacks of the email and password and signs in;
// end signs the session out.
func (a *app) signIn(cmd *cobra.Command, s login, email string) (*apiclient.Client, func(), error) {
	email, err := cmpLine(email, func() (string, error) { return a.line("email: ") })
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("read the email: %w", err)}
	}
	password, err := a.password()
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("read the password: %w", err)}
	}
	cl := &apiclient.Client{BaseURL: s.URL, Project: s.Project}
	sess, err := cl.Login(cmd.Context(), apiclient.Credentials{Email: email, Password: password})
	if err != nil {
		return nil, nil, err
	}
	cl.Token = sess.Token
	return cl, func() { _ = cl.Logout(context.WithoutCancel(cmd.Context())) }, nil
}

func cmpLine(v string, read func() (string, error)) (string, error) {
	if v != "" {
		return v, nil
	}
	return read()
}

// line reads one line of standard input, prompting on a terminal.
func (a *app) line(prompt string) (string, error) {
	if a.io.StdinTerminal && prompt != "" {
		fmt.Fprint(a.io.Stderr, prompt)
	}
	if a.stdin == nil {
		a.stdin = bufio.NewReader(a.io.Stdin)
	}
	s, err := a.stdin.ReadString('\n')
	s = strings.TrimRight(s, "\r\n")
	if s == "" {
		return "", cmp.Or(err, errors.New("empty"))
	}
	return s, nil
}

// password reads the password without echo on a terminal, else as a line.
func (a *app) password() (string, error) {
	if !a.io.StdinTerminal || a.io.ReadPassword == nil {
		return a.line("")
	}
	fmt.Fprint(a.io.Stderr, "password: ")
	p, err := a.io.ReadPassword()
	fmt.Fprintln(a.io.Stderr)
	if err == nil && p == "" {
		err = errors.New("empty")
	}
	return p, err
}

func readPassword() (string, error) {
	b, err := term.ReadPassword(int(os.Stdin.Fd()))
	return string(b), err
}

func (a *app) logoutCommand() *cobra.Command {
	c := &cobra.Command{Use: "logout", Short: "revoke the stored login's API key and forget it", Args: args(),
		Long: "Revoke the API key `switchboard login` made and remove the stored login. Revoking a\n" +
			"key needs the project's admin role, which a key without the admin scope lacks:\n" +
			"--email signs in as a person to revoke it (the password is read from standard input,\n" +
			"or asked for without echo on a terminal). The stored login is removed either way.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := a.storedLogin()
			if err != nil || l.APIKey == "" {
				return cmp.Or[error](err, usageError{errors.New("not logged in")})
			}
			revoke := a.revokeLogin(cmd, l)
			path, _ := a.loginPath()
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the stored login: %w", err)
			}
			if revoke != nil {
				return fmt.Errorf("forgot the login, but its key %s is still valid (revoke it with switchboard keys revoke %s --email …): %w", l.KeyID, l.KeyID, revoke)
			}
			a.say("logged out of %s", l.URL)
			return nil
		}}
	c.Flags().StringVar(&a.email, "email", "", "sign in as this account to revoke the key")
	return c
}

// revokeLogin revokes the stored login's key (none made by login: nothing
// to revoke), with a session of --email or with the key itself. A key
// already refused (401) is as good as revoked.
func (a *app) revokeLogin(cmd *cobra.Command, l login) error {
	if l.KeyID == "" {
		return nil
	}
	cl := &apiclient.Client{BaseURL: l.URL, Token: l.APIKey, Project: l.Project}
	if a.email != "" {
		s, end, err := a.signIn(cmd, l, a.email)
		if err != nil {
			return err
		}
		defer end()
		cl = s
	}
	err := cl.RevokeAPIKey(cmd.Context(), l.KeyID)
	if apiclient.IsStatus(err, 401) && a.email == "" {
		return nil
	}
	return err
}
