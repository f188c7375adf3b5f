package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/switchboard/switchboard/infra/config"
)

// logBanner says the replica is serving. With the embedded PostgreSQL (a
// person on a laptop) it writes the ready block to w; with DATABASE_URL it
// logs one line with the URLs.
func (a *app) logBanner(w io.Writer) {
	base := "http://localhost:" + strconv.Itoa(a.port())
	if a.embedded != nil {
		fmt.Fprint(w, a.readyBlock(base))
		return
	}
	attrs := []any{"api", base + "/v1", "docs", base + "/docs", "roles", strings.Join(a.cfg.Roles, ","), "registration", a.cfg.Registration}
	if a.cfg.HasRole(config.RoleWeb) {
		attrs = append([]any{"console", base + "/console"}, attrs...)
	}
	a.logger.Info("switchboard is serving", attrs...)
}

// readyBlock is what a person starting Switchboard on a laptop reads: where
// the console, API and docs are, what to do first, and how to add a
// replica. The database password stays in the data directory.
func (a *app) readyBlock(base string) string {
	dir, _ := filepath.Abs(a.cfg.DataDir)
	var b strings.Builder
	fmt.Fprintf(&b, "\nSwitchboard is ready (roles %s; registration %s; embedded PostgreSQL in %s)\n",
		strings.Join(a.cfg.Roles, ","), a.cfg.Registration, dir)
	if a.cfg.HasRole(config.RoleWeb) {
		fmt.Fprintf(&b, "  console   %s/console\n  API       %s/v1\n  docs      %s/docs\n", base, base, base)
	}
	if a.cfg.WebhookPrivate {
		b.WriteString("  webhooks  may call local and private addresses (SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=false refuses them)\n")
	}
	fmt.Fprintf(&b, "  database  %s (password in %s)\n", config.RedactURL(a.embedded.URL()), filepath.Join(dir, "postgres.password"))
	self := selfCommand()
	if _, set := os.LookupEnv("SWITCHBOARD_DATA_DIR"); set {
		self = "SWITCHBOARD_DATA_DIR=" + dir + " " + self
	}
	account := "create an account in the console"
	if a.cfg.Registration != "open" {
		account = fmt.Sprintf("create an account with `%s admin create-user EMAIL`", self)
	}
	fmt.Fprintf(&b, "next: %s, then `%s admin grant EMAIL` makes it an admin\n", account, self)
	fmt.Fprintf(&b, "      a second replica: %sSWITCHBOARD_DATA_DIR=%s PORT=%d %s\n\n", sharedEnv(), dir, a.port()+1, selfCommand())
	return b.String()
}

// port is the port the replica listens on.
func (a *app) port() int { return a.listener.Addr().(*net.TCPAddr).Port }
