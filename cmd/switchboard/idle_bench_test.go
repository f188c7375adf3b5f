package main

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/switchboard/infra/dbtest"
)

// idleSources names where an idle replica's statements come from, by what
// their text matches (the first match wins); anything else is "other".
var idleSources = []struct {
	name string
	re   *regexp.Regexp
}{
	{"tx-control", regexp.MustCompile(`(?i)^\s*(begin|commit|rollback)\b`)},
	{"claim-loop", regexp.MustCompile(`FROM\s+tasks\s+WHERE\s+active`)},
	{"heartbeat", regexp.MustCompile(`cluster_nodes`)},
	{"river-fetch", regexp.MustCompile(`JobGetAvailable`)},
	{"river-elector", regexp.MustCompile(`Leader`)},
	{"river-scheduler", regexp.MustCompile(`JobSchedule\b`)},
	{"river-reports", regexp.MustCompile(`JobCountByAllStates|QueueGet|JobGetStuck`)},
}

// BenchmarkIdleReplica starts one replica (web and worker, the real
// wiring) on a database of its own, lets it settle for 10 s, and counts its
// transactions for 60 s of doing nothing (pg_stat_database of its
// database). Where the server has pg_stat_statements loaded (point
// TEST_DATABASE_URL at one started with
// shared_preload_libraries=pg_stat_statements) it also counts statements,
// BEGIN and COMMIT included, which is the round trips, by source.
//
//	go test -run '^$' -bench IdleReplica -benchtime 1x ./cmd/switchboard/
func BenchmarkIdleReplica(b *testing.B) {
	ctx := context.Background()
	dbURL := dbtest.NewDatabaseURL(b)
	u, err := url.Parse(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	admin, err := pgx.Connect(ctx, dbtest.AdminURL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	var preloaded bool
	if err := admin.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries') LIKE '%pg_stat_statements%'`).Scan(&preloaded); err != nil {
		b.Fatal(err)
	}
	if preloaded {
		if _, err := admin.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
			b.Fatal(err)
		}
	}
	startServer(b, testConfig(b, dbURL))
	time.Sleep(10 * time.Second) // settle: an interval to wait out, not an event
	x0 := idleXacts(b, admin, name)
	s0, haveStatements := idleStatements(ctx, admin, name)
	const idle = 60 * time.Second
	start := time.Now()
	time.Sleep(idle)
	elapsed := time.Since(start).Seconds()
	x1 := idleXacts(b, admin, name)
	b.ReportMetric(float64(x1-x0)/elapsed, "xacts/s")
	if s1, ok := idleStatements(ctx, admin, name); ok && haveStatements {
		total := 0.0
		for src, n := range s1 {
			d := float64(n-s0[src]) / elapsed
			total += d
			b.ReportMetric(d, src+"-stmts/s")
		}
		b.ReportMetric(total, "round-trips/s")
		if testing.Verbose() {
			logIdleStatements(ctx, b, admin, name, elapsed)
		}
	}
	b.ReportMetric(0, "ns/op")
}

// idleXacts is the transactions committed and rolled back in database name.
func idleXacts(b *testing.B, admin *pgx.Conn, name string) int64 {
	b.Helper()
	ctx := context.Background()
	// Statistics reach the shared counters when a backend flushes them (at
	// most once a second, and within 10 s for an idle one); a snapshot
	// cleared first reads the latest.
	_, _ = admin.Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
	var n int64
	if err := admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1`, name).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// idleStatements is the statements run in database name by source, when
// pg_stat_statements can say.
func idleStatements(ctx context.Context, admin *pgx.Conn, name string) (map[string]int64, bool) {
	rows, err := admin.Query(ctx, `
		SELECT s.query, s.calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		WHERE d.datname = $1`, name)
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var q string
		var calls int64
		if rows.Scan(&q, &calls) != nil {
			return nil, false
		}
		out[idleSource(q)] += calls
	}
	return out, rows.Err() == nil
}

func idleSource(query string) string {
	for _, s := range idleSources {
		if s.re.MatchString(query) {
			return s.name
		}
	}
	return "other"
}

// logIdleStatements logs every statement of database name with its calls
// per second over elapsed (cumulative since the database was made; the
// settle period is short beside the idle one), most frequent first: with
// -v, where each source's figure comes from.
func logIdleStatements(ctx context.Context, b *testing.B, admin *pgx.Conn, name string, elapsed float64) {
	rows, err := admin.Query(ctx, `
		SELECT s.calls, regexp_replace(left(s.query, 160), '\s+', ' ', 'g') FROM pg_stat_statements s
		JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 ORDER BY s.calls DESC LIMIT 25`, name)
	if err != nil {
		b.Logf("statements: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var calls int64
		var q string
		if rows.Scan(&calls, &q) == nil {
			b.Logf("%6d calls  %-15s %s", calls, idleSource(q), q)
		}
	}
}
