// Command switchboard is the one binary: `serve` (default) runs the roles
// named in SWITCHBOARD_ROLES, `migrate` applies migrations and exits,
// `version` prints the build version. `--help` lists the configuration.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchboard/switchboard/infra/config"
	"github.com/switchboard/switchboard/infra/logging"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

const usage = `switchboard — scheduled jobs and realtime messages on PostgreSQL

Usage:
  switchboard [serve]   run the service (default)
  switchboard migrate   apply database migrations and exit
  switchboard version   print the version
  switchboard --help    this text and every environment variable

`

func main() {
	os.Exit(realMain(os.Args[1:]))
}

func realMain(args []string) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
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
		fmt.Println(version)
		return 0
	case "serve", "migrate":
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "switchboard: configuration: %v\n(run switchboard --help for every variable)\n", err)
		return 2
	}
	logger := logging.New(os.Stderr, cfg.LogFormat, cfg.LogLevel)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cmd == "migrate" {
		err = migrate(ctx, cfg, logger)
	} else {
		err = run(ctx, cfg, logger)
	}
	if err != nil {
		logger.Error("switchboard: "+cmd+" failed", "error", err)
		return 1
	}
	return 0
}
