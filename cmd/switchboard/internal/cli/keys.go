package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchboard/switchboard/cmd/switchboard/internal/apiclient"
)

func (a *app) keysCommand() *cobra.Command {
	c := group("keys", "list, create and revoke API keys")
	c.Long = "List, create and revoke the project's API keys. These need the project's admin\n" +
		"role, which an API key acts with only when it has the admin scope; and keys cannot\n" +
		"make keys. --email signs in as a person for the one request instead (the password\n" +
		"is read from standard input, or asked for without echo on a terminal)."
	c.PersistentFlags().StringVar(&a.email, "email", "", "sign in as this account for this request")
	c.AddCommand(a.keyListCommand(), a.keyCreateCommand(), a.keyRevokeCommand())
	return c
}

// withKeys runs a keys command with the client that may manage keys: a
// session of --email, ended after it, else the configured key.
func (a *app) withKeys(cmd *cobra.Command, run func(*apiclient.Client) error) error {
	if a.email == "" {
		cl, err := a.client()
		if err != nil {
			return err
		}
		return run(cl)
	}
	s, err := a.serverSettings()
	if err != nil {
		return err
	}
	cl, end, err := a.signIn(cmd, s, a.email)
	if err != nil {
		return err
	}
	defer end()
	return run(cl)
}

func (a *app) keyListCommand() *cobra.Command {
	return &cobra.Command{Use: "list", Short: "list the account's API keys (without secrets)", Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withKeys(cmd, func(cl *apiclient.Client) error {
				l, err := cl.APIKeys(cmd.Context())
				if err != nil {
					return err
				}
				return a.show(l, func() *table { return keyTable(l.Items) })
			})
		}}
}

func keyTable(keys []apiclient.APIKey) *table {
	t := &table{head: []string{"ID", "NAME", "PREFIX", "SCOPES", "CREATED", "EXPIRES", "LAST USED"}}
	for _, k := range keys {
		t.add(k.ID, clip(k.Name, 30), k.Prefix, strings.Join(k.Scopes, ","), when(&k.CreatedAt), when(k.ExpiresAt), when(k.LastUsedAt))
	}
	return t
}

func (a *app) keyCreateCommand() *cobra.Command {
	var (
		in      apiclient.APIKeyCreate
		expires string
	)
	c := &cobra.Command{Use: "create NAME", Short: "create an API key (its secret is shown once; needs --email)",
		Args: args("NAME"),
		RunE: func(cmd *cobra.Command, got []string) error {
			var err error
			in.Name = got[0]
			if in.ExpiresAt, err = timeFlag("expires-at", expires); err != nil {
				return err
			}
			return a.withKeys(cmd, func(cl *apiclient.Client) error {
				k, err := cl.CreateAPIKey(cmd.Context(), in)
				if err != nil {
					return err
				}
				return a.show(k, func() *table {
					return fields("id", k.ID, "name", k.Name, "scopes", strings.Join(k.Scopes, ","), "expires", when(k.ExpiresAt),
						"secret", k.Secret+"  (shown only now)")
				})
			})
		}}
	c.Flags().StringSliceVar(&in.Scopes, "scope", nil, "read, write, admin (repeatable; default read,write)")
	c.Flags().StringVar(&expires, "expires-at", "", "RFC 3339 time the key stops working (default never)")
	_ = c.RegisterFlagCompletionFunc("scope", cobra.FixedCompletions([]cobra.Completion{"read", "write", "admin"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

func (a *app) keyRevokeCommand() *cobra.Command {
	return &cobra.Command{Use: "revoke KEY_ID", Short: "revoke an API key on every replica", Args: args("KEY_ID"),
		ValidArgsFunction: a.completeKeys,
		RunE: func(cmd *cobra.Command, got []string) error {
			return a.withKeys(cmd, func(cl *apiclient.Client) error {
				if err := cl.RevokeAPIKey(cmd.Context(), got[0]); err != nil {
					return err
				}
				a.say("revoked key %s", got[0])
				return nil
			})
		}}
}
