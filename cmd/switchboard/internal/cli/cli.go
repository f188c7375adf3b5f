// Package cli is switchboard's command line for tasks, runs and API keys:
// it talks to any server over the public API (package apiclient) with an
// API key from the environment or a stored login, prints tables on a
// terminal and JSON for scripts, and says what failed in its exit code.
package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/switchboard/switchboard/cmd/switchboard/internal/apiclient"
)

// Exit codes: what failed.
const (
	ExitOK        = 0 // done
	ExitAPI       = 1 // the API refused the request (4xx); its detail is on stderr
	ExitUsage     = 2 // a bad command, flag or argument, or no server or key configured
	ExitServer    = 3 // the server failed (5xx) or could not be reached
	ExitRunFailed = 4 // runs tail RUN_ID: a run followed ended failed or cancelled
)

// Commands are the first arguments this package answers; the binary
// dispatches them here.
var Commands = []string{"tasks", "runs", "keys", "login", "logout", "completion",
	cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd}

// IO is the process's surroundings, replaceable in tests.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// ConfigDir is where the stored login lives (os.UserConfigDir).
	ConfigDir func() (string, error)
	// Terminal reports stdout is a terminal (tables) and stdin is one
	// (prompts).
	StdoutTerminal, StdinTerminal bool
	// ReadPassword reads a line from the terminal without echo.
	ReadPassword func() (string, error)
}

// OS is the process's own IO.
func OS() IO {
	return IO{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		ConfigDir: os.UserConfigDir, StdoutTerminal: isTerminal(os.Stdout), StdinTerminal: isTerminal(os.Stdin),
		ReadPassword: readPassword,
	}
}

// ServerCommands are the binary's other commands, offered by completion.
var ServerCommands = []cobra.Completion{
	"serve\trun the service", "migrate\tapply database migrations and exit",
	"admin\toperator commands on accounts", "version\tprint the version",
	"openapi\tprint the OpenAPI document", "healthcheck\tcheck this host's readiness",
}

// Main runs one command line (args without the program name) and
// returns its exit code.
func Main(ctx context.Context, args []string, io IO) int {
	a := &app{io: io}
	root := a.root()
	root.SetArgs(args)
	root.SetIn(io.Stdin)
	root.SetOut(io.Stdout)
	root.SetErr(io.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(io.Stderr, "switchboard: %v\n", err)
	return exitCode(err)
}

// exitCode says what kind of failure err is.
func exitCode(err error) int {
	var (
		p   *apiclient.Problem
		n   *apiclient.NetworkError
		run runFailedError
	)
	switch {
	case errors.As(err, &run):
		return ExitRunFailed
	case errors.As(err, &p) && p.Status < 500:
		return ExitAPI
	case errors.As(err, &p), errors.As(err, &n):
		return ExitServer
	default:
		return ExitUsage
	}
}

// runFailedError is a followed run that ended without succeeding.
type runFailedError struct{ run apiclient.Run }

func (e runFailedError) Error() string {
	return fmt.Sprintf("run %s %s", e.run.ID, e.run.Status)
}

// app is one command line's state: its IO and global flags.
type app struct {
	io      IO
	stdin   *bufio.Reader // standard input, read a line at a time
	url     string
	project string
	output  string
	email   string // keys and logout: sign in as this account
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "switchboard",
		Short: "scheduled jobs and realtime messages on PostgreSQL",
		Long: "switchboard's command line talks to a server over its API with an API key:\n" +
			"SWITCHBOARD_URL and SWITCHBOARD_API_KEY, or a stored `switchboard login`.\n" +
			"Run `switchboard --help` for the server's own commands.",
		SilenceUsage: true, SilenceErrors: true,
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return ServerCommands, cobra.ShellCompDirectiveNoFileComp
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&a.url, "url", "", "server URL (default $SWITCHBOARD_URL, else the stored login's)")
	f.StringVar(&a.project, "project", "", "project id sent as X-Switchboard-Project (default $SWITCHBOARD_PROJECT, else the stored login's)")
	f.StringVarP(&a.output, "output", "o", "table", "table or json")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]cobra.Completion{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return a.checkOutput() }
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(a.tasksCommand(), a.runsCommand(), a.keysCommand(), a.loginCommand(), a.logoutCommand())
	return root
}

func (a *app) checkOutput() error {
	if a.output != "table" && a.output != "json" {
		return usageError{fmt.Errorf("--output %q: want table or json", a.output)}
	}
	return nil
}

// usageError is a command line that cannot be run as written.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// args checks a command's positional arguments: exactly n, named.
func args(names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, got []string) error {
		if len(got) != len(names) {
			return usageError{fmt.Errorf("want %d argument(s) %v, got %d", len(names), names, len(got))}
		}
		return nil
	}
}

// group is a command that only holds subcommands: run alone, or with an
// unknown subcommand, it is a usage error (cobra would print help and
// succeed).
func group(use, short string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, got []string) error {
			if len(got) == 0 {
				return usageError{fmt.Errorf("%s needs a subcommand (see switchboard %s --help)", use, use)}
			}
			return usageError{fmt.Errorf("unknown command %q for %s (see switchboard %s --help)", got[0], use, use)}
		},
	}
}
