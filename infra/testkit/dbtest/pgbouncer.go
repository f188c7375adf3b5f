package dbtest

import (
	"context"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/infra/testkit/pgbouncer"
)

// RequirePgBouncerEnv, when set (.ci/run sets it, as does CI), makes a
// missing pgbouncer binary fail the tests that need it instead of skipping
// them.
const RequirePgBouncerEnv = "SWITCHBOARD_PGBOUNCER_TESTS"

var (
	bouncerOnce sync.Once
	bouncer     *pgbouncer.Bouncer
	bouncerErr  error
)

// ThroughPgBouncer is dbURL (a database of the test server) reached
// through a real PgBouncer in transaction mode, one per package binary,
// stopped by Main. The test is skipped when pgbouncer is not installed,
// unless SWITCHBOARD_PGBOUNCER_TESTS or CI is set: then it fails.
func ThroughPgBouncer(t testing.TB, dbURL string) string {
	t.Helper()
	if pgbouncer.Find() == "" {
		if os.Getenv(RequirePgBouncerEnv) != "" || os.Getenv("CI") != "" {
			t.Fatalf("dbtest: %v", pgbouncer.ErrNotInstalled)
		}
		t.Skipf("dbtest: %v", pgbouncer.ErrNotInstalled)
	}
	if err := setup(); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	bouncerOnce.Do(startBouncer)
	if bouncerErr != nil {
		t.Fatalf("dbtest: %v", bouncerErr)
	}
	u, err := bouncer.Through(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func startBouncer() {
	u, err := url.Parse(serverURL)
	if err != nil {
		bouncerErr = err
		return
	}
	pw, _ := u.User.Password()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bouncer, bouncerErr = pgbouncer.Start(ctx, pgbouncer.Options{
		Server: u.Host, User: u.User.Username(), Password: pw, PoolSize: 10,
	}, "postgres")
}

// stopBouncer ends the package binary's PgBouncer, if one started.
func stopBouncer() {
	if bouncer != nil {
		bouncer.Stop()
	}
}
