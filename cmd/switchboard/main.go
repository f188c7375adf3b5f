// Command switchboard is the one binary: `serve` (default) runs the roles
// named in SWITCHBOARD_ROLES, `migrate` applies migrations and exits,
// `admin` grants and revokes the admin role, `version` prints the build
// version, `openapi` prints the API's OpenAPI document, and `tasks`,
// `runs`, `keys`, `login`, `logout` and `completion` are the command line
// that talks to a server over its API (package cli). `--help` lists the
// configuration.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/switchboard/switchboard/cmd/switchboard/internal/cli"
	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/logging"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// revision is the commit the binary was built from, stamped like version
// (-X main.revision=<commit>); empty: the go command's VCS stamp, if any.
var revision = ""

const usage = `switchboard — scheduled jobs and realtime messages on PostgreSQL

Usage:
  switchboard [serve]                 run the service (default)
  switchboard migrate                 apply database migrations and exit
  switchboard admin grant <email>     give a registered account the admin role
  switchboard admin revoke <email>    take it away (counts at once on every replica)
  switchboard admin disable <email>   refuse the account's logins and tokens
  switchboard admin enable <email>    undo disable
  switchboard admin list              print the admins
  switchboard admin create-user <email>
                                      make an account whatever SWITCHBOARD_REGISTRATION says; the
                                      password is read from standard input when piped, else
                                      generated and printed once
  switchboard admin reset-password <email>
                                      print a single-use password reset link, valid an hour
  switchboard version [-v]            print the version (-v: with revision, Go version and platform)
  switchboard openapi [--yaml]        print the OpenAPI document (no database needed)
  switchboard healthcheck [URL]       exit 0 if this host's /healthz/ready answers 200 (container health checks)
  switchboard --help                  this text and every environment variable

Command line (talks to a server over its API; SWITCHBOARD_URL and
SWITCHBOARD_API_KEY, or a stored login; docs/cli.md):
  switchboard login                   store a server and an API key
  switchboard tasks list|get|create|update|pause|resume|delete|trigger|backfill|rotate-secret
  switchboard runs list|get|cancel|retry|tail
  switchboard keys list|create|revoke
  switchboard completion bash|zsh|fish|powershell
                                      print a shell completion script
  switchboard tasks --help            (and so on) each command's flags

Without DATABASE_URL every command uses the private PostgreSQL in
SWITCHBOARD_DATA_DIR (starting it, or attaching to the one a running replica
started). With DATABASE_URL set, serve also requires SWITCHBOARD_JWT_SECRET
and SWITCHBOARD_CLUSTER_SECRET (16+ characters, the same on every replica);
migrate and admin need only DATABASE_URL.

`

func main() {
	os.Exit(realMain(os.Args[1:]))
}

func realMain(args []string) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	if slices.Contains(cli.Commands, cmd) {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return cli.Main(ctx, args, cli.OS())
	}
	switch cmd {
	case "-h", "--help", "help":
		fmt.Print(usage)
		if err := config.Usage(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "version", "--version":
		if err := versionCommand(args[1:], os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "switchboard version: %v\n", err)
			return 2
		}
		return 0
	case "openapi":
		if err := openapiCommand(args[1:], os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "switchboard openapi: %v\n", err)
			return 2
		}
		return 0
	case "healthcheck":
		if err := healthcheck(context.Background(), args[1:], os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "switchboard healthcheck: %v\n", err)
			return 1
		}
		return 0
	case "serve", "migrate":
	case "admin":
		if _, err := parseAdminArgs(args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "switchboard admin: %v\n\n%s", err, usage)
			return 2
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	load := config.Load
	if cmd != "serve" {
		load = config.LoadDatabase // migrate and admin use only the database
	}
	cfg, err := load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "switchboard: configuration: %v\n(run switchboard --help for every variable)\n", err)
		return 2
	}
	logger := logging.New(os.Stderr, cfg.LogFormat, cfg.LogLevel)
	for _, w := range config.Removed() {
		logger.Warn(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "migrate":
		err = migrate(ctx, cfg, logger)
	case "admin":
		err = adminCommand(ctx, cfg, logger, args[1:], pipedStdin(), os.Stdout)
	default:
		err = run(ctx, cfg, logger)
	}
	if err != nil {
		logger.Error("switchboard: "+cmd+" failed", "error", err)
		return 1
	}
	return 0
}

// pipedStdin is the standard input when it is not a terminal, else nil.
func pipedStdin() io.Reader {
	if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice == 0 {
		return os.Stdin
	}
	return nil
}
