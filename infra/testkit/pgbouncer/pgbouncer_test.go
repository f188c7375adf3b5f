package pgbouncer_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/freeport"
	"github.com/switchboard/switchboard/infra/testkit/dbtest"
	"github.com/switchboard/switchboard/infra/testkit/pgbouncer"
	"github.com/switchboard/switchboard/infra/testkit/testwait"
	"github.com/switchboard/switchboard/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m, migrations.Hash(), migrations.Migrate) }

// TestRepointKeepsTheAddress: clients keep PgBouncer's URL while the server
// behind it goes away (repointed at a port nothing listens on: queries
// fail) and comes back (repointed again: they pass).
func TestRepointKeepsTheAddress(t *testing.T) {
	t.Parallel()
	dbtest.ThroughPgBouncer(t, dbtest.AdminURL(t)) // skips without pgbouncer, as in CI it fails
	server, err := url.Parse(dbtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := server.User.Password()
	ctx := context.Background()
	b, err := pgbouncer.Start(ctx, pgbouncer.Options{Server: server.Host, User: server.User.Username(), Password: pw}, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	query := func() error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := pgx.Connect(qctx, b.URL("postgres"))
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		_, err = c.Exec(qctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol)
		return err
	}
	nowhere, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Repoint(nowhere); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "queries to fail once repointed at nothing", func() bool { return query() != nil })
	if err := b.Repoint(server.Host); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "queries to pass once repointed back", func() bool { return query() == nil })
}
